"""Notebook 14, the field guide for launches, ranks and signals: the workers that reproduce each case.

Every function that notebook 14 starts in another process lives here (spawn and forkserver
children import their target by module and name), and the notebook displays each one before it
runs it. Like :mod:`helpers.field_guide`, the module is import-light: torch is imported inside the
functions that need it.

Example::

    >>> import multiprocessing as mp
    >>> from helpers.field_guide_launches import logging_in_worker
    >>> results = mp.get_context("spawn").SimpleQueue()
    >>> child = mp.get_context("spawn").Process(target=logging_in_worker, args=(results, False))
    >>> child.start(); child.join(timeout=60); results.get()[1:]  # a spawn child: no handler, WARNING
    ([], 'WARNING')
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # import-light: torch only where a function runs it
    from multiprocessing.queues import Queue

    import torch

__all__ = [
    "stop_at_breakpoint",
    "logging_in_worker",
    "model_with_unused_head",
    "model_checkpointed_twice",
    "rank_input",
    "train_two_steps",
    "first_step_gradient",
    "mean_gradient",
    "launcher",
    "pids_written",
    "still_running",
    "torchrun_signals",
    "stop_at_distributed_breakpoint",
]


def stop_at_breakpoint(rank: int = 0) -> None:
    """A worker with ``breakpoint()`` in it: where does the debugger read its commands from?

    [14 · breakpoint() in a worker](../notebooks/14_field_guide_launches_and_ranks.ipynb#breakpoint-in-a-worker-bdb-bdbquit)
    runs it in a child; ``multiprocessing`` gave the child ``/dev/null`` as its stdin.

    >>> import multiprocessing
    >>> child = multiprocessing.get_context("spawn").Process(target=stop_at_breakpoint)
    >>> child.start(); child.join(60); child.exitcode  # bdb.BdbQuit (3.14+: sys.exit(1)) in the child
    1
    """
    import sys

    print(f"rank {rank}: stdin is {sys.stdin.name!r}", flush=True)
    breakpoint()  # pdb reads its commands from sys.stdin: here it reads end-of-file, and quits
    print(f"rank {rank}: past the breakpoint", flush=True)  # never printed


def logging_in_worker(results: Queue, configure: bool) -> None:
    """Report the root logger's handlers and level as a worker sees them; ``configure``: set up
    logging first, in the worker (the fix). Puts (process name, handler types, level name) on
    ``results``. [14 · Log lines lost](../notebooks/14_field_guide_launches_and_ranks.ipynb#log-lines-missing-in-spawn-workers)

    >>> import queue
    >>> results = queue.Queue()
    >>> logging_in_worker(results, configure=False)
    >>> results.get(timeout=5)[0]
    'MainProcess'
    """
    import logging
    import multiprocessing

    if configure:  # the fix: every process configures its own logging
        logging.basicConfig(level=logging.INFO, format="%(processName)s %(levelname)s %(message)s")
    root = logging.getLogger()
    logging.getLogger("train").info("step 1 done")  # dropped where the level is WARNING
    handlers = [type(handler).__name__ for handler in root.handlers]
    results.put((multiprocessing.current_process().name, handlers, logging.getLevelName(root.level)))


def model_with_unused_head() -> torch.nn.Module:
    """A model whose forward() never calls one of its layers
    ([14 · Unused](../notebooks/14_field_guide_launches_and_ranks.ipynb#ddp-expected-to-have-finished-reduction-in-the-prior-iteration)).

    >>> [name for name, _ in model_with_unused_head().named_children()]
    ['spare']
    """
    import torch

    net = torch.nn.Linear(4, 1)
    net.spare = torch.nn.Linear(4, 1)  # registered, so DDP waits for its gradient
    return net


def model_checkpointed_twice(use_reentrant: bool = True) -> torch.nn.Module:
    """A model that runs one layer twice, each time under an activation checkpoint (reentrant by
    default; DDP's docstring: a layer checkpointed more than once with ``use_reentrant=True`` is not
    supported) ([14 · Appendix B](../notebooks/14_field_guide_launches_and_ranks.ipynb#appendix-b-more-ddp-errors-that-are-not-hangs)).

    >>> import torch
    >>> model_checkpointed_twice()(torch.ones(1, 4, requires_grad=True)).shape
    torch.Size([1, 4])
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    class Twice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 4)

        def forward(self, x):
            return sum(checkpoint(self.layer, x, use_reentrant=use_reentrant) for _ in range(2))

    return Twice()


MODELS = {  # the cases of train_two_steps and first_step_gradient
    "unused head": model_with_unused_head,
    "checkpointed twice": model_checkpointed_twice,
    "checkpointed twice, use_reentrant=False": lambda: model_checkpointed_twice(use_reentrant=False),
}


def rank_input(rank: int) -> torch.Tensor:
    """Rank ``rank``'s batch: two rows of ``rank + 1``. Ranks must see different data, or a gradient
    that was never averaged looks averaged.
    [14 · DDP](../notebooks/14_field_guide_launches_and_ranks.ipynb#ddp-expected-to-have-finished-reduction-in-the-prior-iteration)

    >>> rank_input(1).tolist()
    [[2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0]]
    """
    import torch

    return torch.full((2, 4), float(rank + 1), requires_grad=True)


def _weight(model: torch.nn.Module) -> torch.Tensor:
    """The weight whose gradient the cases compare: the reused layer's, or the Linear's own."""
    return model.layer.weight if hasattr(model, "layer") else model.weight


def train_two_steps(
    rank: int, world_size: int, port: int, case: str, option: str | None, timeout: float
) -> None:
    """Two DDP steps (gloo) of the model ``case`` names (``"unused head"``: :func:`model_with_unused_head`,
    ``"checkpointed twice"``: :func:`model_checkpointed_twice`), each rank on its own
    :func:`rank_input`; ``option`` (``"find_unused_parameters"``, ``"static_graph"`` or None) is
    passed to DDP as True. Notebook 14's DDP cases; returns quietly when both steps ran.

    >>> from helpers.ddp import free_port
    >>> train_two_steps(0, 1, free_port(), "unused head", "find_unused_parameters", timeout=60.0)
    """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    url = f"tcp://127.0.0.1:{port}"
    dist.init_process_group(
        "gloo", init_method=url, rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout)
    )
    try:
        model = DDP(MODELS[case](), **({option: True} if option else {}))
        for _step in range(2):  # the second forward checks that the first step's reduction ended
            model(rank_input(rank)).sum().backward()
    finally:
        dist.destroy_process_group()


def first_step_gradient(
    rank: int, world_size: int, port: int, case: str, option: str | None, results: Queue
) -> None:
    """One DDP step (gloo) of ``case`` (as in :func:`train_two_steps`) on this rank's
    :func:`rank_input`; puts (rank, the first row of the weight's gradient after ``backward()``) on
    ``results``. DDP should leave every rank with :func:`mean_gradient`.
    [14 · Appendix B](../notebooks/14_field_guide_launches_and_ranks.ipynb#appendix-b-more-ddp-errors-that-are-not-hangs)

    >>> import queue
    >>> from helpers.ddp import free_port
    >>> results = queue.Queue()
    >>> first_step_gradient(0, 1, free_port(), "unused head", None, results)
    >>> results.get(timeout=5)
    (0, [2.0, 2.0, 2.0, 2.0])
    """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        model = DDP(MODELS[case](), **({option: True} if option else {}))
        model(rank_input(rank)).sum().backward()  # backward() returns once DDP has averaged
        results.put((rank, _weight(model.module).grad[0].tolist()))
    finally:
        dist.destroy_process_group()


def mean_gradient(case: str, world_size: int) -> list[float]:
    """The gradient DDP must give every rank, computed in this one process without DDP: the mean of
    the ranks' gradients (each on its :func:`rank_input`), first row. The cases' gradients do not
    depend on the weights, so a fresh model gives the same numbers as the ranks' models.
    [14 · Appendix B](../notebooks/14_field_guide_launches_and_ranks.ipynb#appendix-b-more-ddp-errors-that-are-not-hangs)

    >>> mean_gradient("unused head", 2)
    [3.0, 3.0, 3.0, 3.0]
    """
    model = MODELS[case]()
    for rank in range(world_size):
        (model(rank_input(rank)).sum() / world_size).backward()  # gradients accumulate: their mean
    return _weight(model).grad[0].tolist()


def pids_written(folder: str, timeout: float = 30.0) -> tuple[int, int]:
    """Wait for :func:`launcher`'s file in ``folder``; return (launcher's pid, worker's pid).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(folder, "pids").write_text("100 101")
    ...     pids_written(folder)
    (100, 101)
    """
    path, deadline = Path(folder, "pids"), time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the launcher wrote no pids in {timeout} s")
        time.sleep(0.05)
    first, second = path.read_text().split()
    return int(first), int(second)


def launcher(folder: str, handle_hangup: bool, nohup: bool = False, seconds: float = 60) -> None:
    """A job's launcher: one worker (it sleeps ``seconds``), both pids written to ``folder``, a
    bounded join and a ``finally`` that stops the worker. ``handle_hangup``: SIGHUP raises
    SystemExit, so the ``finally`` runs; ``nohup``: started as ``nohup`` starts it (SIGHUP ignored),
    and then the handler keeps that ``SIG_IGN``.
    [14 · SIGHUP](../notebooks/14_field_guide_launches_and_ranks.ipynb#the-terminal-closed-sighup-and-the-workers-left-behind)

    >>> import multiprocessing, shutil, signal, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> job = multiprocessing.get_context("spawn").Process(target=launcher, args=(folder, True))
    >>> job.start(); job_pid, worker_pid = pids_written(folder)
    >>> os.kill(job_pid, signal.SIGHUP); job.join(60); job.exitcode  # 128 + SIGHUP
    129
    >>> still_running(worker_pid); shutil.rmtree(folder)
    False
    """
    import multiprocessing
    import signal

    def hang_up(signum, frame):
        raise SystemExit(128 + signum)  # unwinds the stack: the finally below runs

    signal.signal(signal.SIGHUP, signal.SIG_IGN if nohup else signal.SIG_DFL)  # how it was started
    if handle_hangup and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # keep nohup's SIG_IGN
        signal.signal(signal.SIGHUP, hang_up)  # the fix; without it, the default action ends the process
    worker = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(seconds,))
    worker.start()
    Path(folder, ".pids").write_text(f"{os.getpid()} {worker.pid}")
    os.replace(Path(folder, ".pids"), Path(folder, "pids"))  # readers see the whole file or none
    try:
        worker.join(timeout=seconds + 60)
    finally:  # skipped when a signal's default action ends the process
        worker.terminate()
        worker.join(timeout=5)


def still_running(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie, which only waits to be collected, does not count).

    >>> still_running(os.getpid())
    True
    """
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def torchrun_signals() -> tuple[str, str]:
    """The signals torchrun's agent turns into a shutdown of its workers, read from the installed
    torch: (the default of ``TORCHELASTIC_SIGNALS_TO_HANDLE``, the line of the check for the main
    thread). [14 · SIGHUP](../notebooks/14_field_guide_launches_and_ranks.ipynb#the-terminal-closed-sighup-and-the-workers-left-behind)

    >>> torchrun_signals()[0]
    'SIGTERM,SIGINT,SIGHUP,SIGQUIT'
    """
    import inspect
    import re

    from torch.distributed.elastic.multiprocessing import api

    source = inspect.getsource(api.PContext.start)
    (default,) = re.findall(r'"TORCHELASTIC_SIGNALS_TO_HANDLE", "([A-Z,]+)"', source)
    (check,) = [line.strip() for line in source.splitlines() if "main_thread()" in line]
    return default, check


def stop_at_distributed_breakpoint(rank: int, port: int) -> None:
    """Rank 0 of a world of one (gloo) stops at ``torch.distributed.breakpoint()``: its pdb reads
    ``/dev/stdin``, the file descriptor 0 the process inherited, not ``sys.stdin``.
    [14 · Appendix A](../notebooks/14_field_guide_launches_and_ranks.ipynb#appendix-a-debuggers-that-work-in-a-rank)

    >>> import subprocess, sys
    >>> from helpers.ddp import free_port
    >>> code = f"import helpers.field_guide_launches as f; f.stop_at_distributed_breakpoint(0, {free_port()})"
    >>> run = subprocess.run([sys.executable, "-c", code], input="up\\np answer\\ncontinue\\n",
    ...                      capture_output=True, text=True, timeout=120)
    >>> "past the breakpoint, answer = 42" in run.stdout
    True
    """
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=1)
    try:
        answer = 6 * 7
        dist.breakpoint(rank=0)  # the other ranks (none here) would wait at a barrier
        print(f"rank {rank}: past the breakpoint, answer = {answer}", flush=True)
    finally:
        dist.destroy_process_group()
