"""Notebook 10, the field guide: the workers that reproduce each error, and the index of error messages.

Every function that notebook 10 starts in a child lives here (spawn and forkserver children import
their target by module and name), and the notebook displays each one before it runs it. The module
is import-light: torch is imported inside the functions that need it, so a spawn ``Pool`` worker
that only squares numbers does not pay for importing torch.

:data:`ERROR_INDEX` is the index of error messages that the README and notebook 10's appendix show
(:func:`error_index_markdown` renders it): each message in the words a user pastes into a search
box, what it means, and the notebook section that explains it. ``tests/test_error_index.py``
checks that each section exists and that each message is what this torch and Python print.

Example::

    >>> from helpers.field_guide import CASES, ERROR_INDEX
    >>> sorted({entry.case for entry in ERROR_INDEX}) == sorted(CASES)
    True
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from helpers.processes import capture_fd_output

__all__ = [
    "CASES",
    "ERROR_INDEX",
    "error_index_markdown",
    "preload_ddp",
    "train_uneven",
    "metric_in_join",
    "reduce_metric",
    "stderr_of_children",
    "memory_cgroup",
    "oom_kills",
    "allocate_in_cgroup",
    "sigkill_self",
    "blas_threads",
    "square",
]

CASES: dict[str, str] = {
    "uneven_inputs": "uneven batches: [10 · Uneven inputs](../notebooks/10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs)",
    "one_rank_collective": "a collective on some ranks: [10 · One rank only](../notebooks/10_field_guide.ipynb#a-collective-called-on-one-rank-only)",
    "port_in_use": "two jobs on one port: [10 · Address in use](../notebooks/10_field_guide.ipynb#address-already-in-use-two-jobs-on-one-port)",
    "local_rank_argument": "--local_rank: [10 · Appendix F](../notebooks/10_field_guide.ipynb#appendix-f-unrecognized-arguments-local-rank-0)",
    "oom_killed": "OOM killer: [10 · Appendix G](../notebooks/10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer)",
    "unpicklable_worker": "notebook worker, no main guard: [01 · The main guard](../notebooks/01_start_methods.ipynb#the-if-name-main-guard)",
    "cuda_in_fork": "CUDA in a forked child: [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda)",
    "shm_full": "a full /dev/shm: [08 · A full /dev/shm](../notebooks/08_debugging_and_pitfalls.ipynb#a-full-dev-shm)",
    "worker_raised": "a worker raised, see its traceback: [06 · When a rank fails](../notebooks/06_ddp_mp_spawn.ipynb#when-a-rank-fails)",
    "too_many_open_files": "out of fds: [02 · Sharing](../notebooks/02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names)",
    "debugger_in_worker": "pdb in a worker: [14 · breakpoint() in a worker](../notebooks/14_field_guide_launches_and_ranks.ipynb#breakpoint-in-a-worker-bdb-bdbquit)",  # noqa: E501
    "ddp_unused_parameters": "a parameter without gradient: [14 · Unused parameters](../notebooks/14_field_guide_launches_and_ranks.ipynb#ddp-expected-to-have-finished-reduction-in-the-prior-iteration)",  # noqa: E501
    "ddp_ready_twice": "a parameter reduced twice in a step: [14 · Appendix B](../notebooks/14_field_guide_launches_and_ranks.ipynb#appendix-b-more-ddp-errors-that-are-not-hangs)",  # noqa: E501
    "signal_off_main_thread": "a launcher in a thread: [14 · Off the main thread](../notebooks/14_field_guide_launches_and_ranks.ipynb#a-launcher-started-off-the-main-thread)",  # noqa: E501
    "global_from_main_block": "a global made under the main guard: [14 · NameError under forkserver](../notebooks/14_field_guide_launches_and_ranks.ipynb#nameerror-in-a-worker-under-forkserver-python-3-14-s-default)",  # noqa: E501
    "lock_across_contexts": "a lock of another context: [14 · Appendix D](../notebooks/14_field_guide_launches_and_ranks.ipynb#appendix-d-python-3-14-s-forkserver-beyond-the-guard)",  # noqa: E501
}
"""The cases of notebook 10 (and the errors that other notebooks explain), by name."""


@dataclass(frozen=True)
class IndexEntry:
    """One row of the index: the message as printed, its case, and where the series explains it."""

    message: str  # the words a user pastes into a search box, exactly as printed
    case: str  # a key of CASES
    notebook: str  # file name in notebooks/
    section: str  # the id of the section that explains it (its anchor in the notebook)
    meaning: str  # one line: what it means


ERROR_INDEX: tuple[IndexEntry, ...] = (
    IndexEntry(
        "AttributeError: Can't get attribute 'worker' on <module '__main__'",
        "unpicklable_worker",
        "01_start_methods.ipynb",
        "appendix-the-error-message-across-python-versions",
        "a spawn/forkserver child cannot import a function defined in a notebook (Python 3.10-3.13; the "
        "module's description after it differs by version; 3.14, 3.15: `module '__main__' has no attribute`)",
    ),
    IndexEntry(
        "current process has finished its bootstrapping phase.",
        "unpicklable_worker",
        "01_start_methods.ipynb",
        "the-if-name-main-guard",
        'a script without `if __name__ == "__main__":` under spawn/forkserver (a message over several'
        " lines; the line above: `RuntimeError: An attempt has been made to start a new process before the`)",
    ),
    IndexEntry(
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
        "multiprocessing, you must use the 'spawn' start method",
        "cuda_in_fork",
        "04_fork_and_cuda.ipynb",
        "fork-versus-cuda",
        "CUDA (even `torch.cuda.is_available()`) ran before a fork",
    ),
    IndexEntry(
        "RuntimeError: received 0 items of ancdata",
        "too_many_open_files",
        "02_shared_tensors.ipynb",
        "sharing-strategies-file-descriptors-or-names",
        "a Queue consumer holds more shared tensors than it may open files (`file_descriptor`: one fd"
        " per storage): raise `ulimit -n` or use `file_system`",
    ),
    IndexEntry(
        "RuntimeError: Too many open files. Communication with the workers is no longer possible.",
        "too_many_open_files",
        "02_shared_tensors.ipynb",
        "sharing-strategies-file-descriptors-or-names",
        "the same in a DataLoader's main process (batches kept alive: one fd per storage); the message goes"
        " on with the two fixes",
    ),
    IndexEntry(
        "RuntimeError: unable to open shared memory object </torch_4242_1234_60> in read-write mode: "
        "Too many open files (24)",
        "too_many_open_files",
        "02_shared_tensors.ipynb",
        "sharing-strategies-file-descriptors-or-names",
        "the same on the sending side, at `share_memory_()` or a Queue's `put`",
    ),
    IndexEntry(
        "RuntimeError: unable to allocate shared memory(shm) for file",
        "shm_full",
        "08_debugging_and_pitfalls.ipynb",
        "a-full-dev-shm",
        "`/dev/shm` is full (from torch 2.13 it ends `No space left on device (28)`; 2.11 named a stale"
        " errno there): `--shm-size`",
    ),
    IndexEntry(
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.",
        "shm_full",
        "08_debugging_and_pitfalls.ipynb",
        "appendix-c-the-bus-error-of-older-torch",
        "a full `/dev/shm` with torch before PR #161910",
    ),
    IndexEntry(
        "RuntimeError: DataLoader timed out after 1 seconds",
        "worker_raised",
        "07_dataloader_workers.ipynb",
        "worker-options-persistent-workers-prefetch-factor-pin-memory-timeout",
        "a worker took longer than the loader's `timeout` for one batch (a stuck or slow Dataset)",
    ),
    IndexEntry(
        "-- Process 1 terminated with the following error:",
        "worker_raised",
        "06_ddp_mp_spawn.ipynb",
        "when-a-rank-fails",
        "one rank raised; `mp.spawn` shows the first failure it saw, which may be an echo (the line under"
        " `torch.multiprocessing.spawn.ProcessRaisedException:` and a blank line; the rank's traceback"
        " follows)",
    ),
    IndexEntry(
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
        "oom_killed",
        "10_field_guide.ipynb",
        "appendix-g-a-worker-killed-by-the-out-of-memory-killer",
        "exit code -9: usually the out-of-memory killer",
    ),
    IndexEntry(
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
        "address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
        "port_in_use",
        "10_field_guide.ipynb",
        "address-already-in-use-two-jobs-on-one-port",
        "another job (or a leftover) holds the rendezvous port (`code: -98` is Linux's errno; macOS"
        " prints -48)",
    ),
    IndexEntry(
        "error: unrecognized arguments: --local-rank=0",
        "local_rank_argument",
        "10_field_guide.ipynb",
        "appendix-f-unrecognized-arguments-local-rank-0",
        "`torch.distributed.launch` passes `--local-rank`; read `LOCAL_RANK` from the environment",
    ),
    IndexEntry(
        "Timed out waiting 5000ms for recv operation to complete",
        "uneven_inputs",
        "10_field_guide.ipynb",
        "a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        "a gloo collective waited past the group's timeout: a rank is elsewhere (uneven inputs?)",
    ),
    IndexEntry(
        "Connection closed by peer [127.0.0.1]:9141",
        "uneven_inputs",
        "10_field_guide.ipynb",
        "a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        "the other rank left (finished or crashed) while this one still communicates"
        ' (torch 2.15 goes on "This is typically caused by a remote worker crashing."; 2.11 does not);'
        " the same case can print `Read error [127.0.0.1]:9141: Connection reset by peer` instead",
    ),
    IndexEntry(
        "RuntimeError: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 4000 ms",
        "one_rank_collective",
        "10_field_guide.ipynb",
        "a-collective-called-on-one-rank-only",
        "with TORCH_DISTRIBUTED_DEBUG=DETAIL: names the ranks that never reached the collective. Use"
        " DETAIL on a reproduction without DDP: with torch 2.15.0 and 2.13.0, any DDP model on gloo"
        " crashes under DETAIL (SIGSEGV)",
    ),
    IndexEntry(
        "bdb.BdbQuit",
        "debugger_in_worker",
        "14_field_guide_launches_and_ranks.ipynb",
        "breakpoint-in-a-worker-bdb-bdbquit",
        "`breakpoint()` in a child process: pdb reads `/dev/null` (multiprocessing's stdin for children),"
        " takes end-of-file as quit; debug one process, or `torch.distributed.breakpoint()`",
    ),
    IndexEntry(
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.",
        "ddp_unused_parameters",
        "14_field_guide_launches_and_ranks.ipynb",
        "ddp-expected-to-have-finished-reduction-in-the-prior-iteration",
        "DDP: a parameter got no gradient in the last step (unused by the loss); remove it, or"
        " `find_unused_parameters=True` / `static_graph=True`",
    ),
    IndexEntry(
        "RuntimeError: Expected to mark a variable ready only once.",
        "ddp_ready_twice",
        "14_field_guide_launches_and_ranks.ipynb",
        "appendix-b-more-ddp-errors-that-are-not-hangs",
        "DDP: a parameter's gradient hook fired twice in one step (the same layer under two reentrant"
        " `checkpoint`s with `find_unused_parameters=True`): `static_graph=True` or `use_reentrant=False`",
    ),
    IndexEntry(
        "ValueError: signal only works in main thread of the main interpreter",
        "signal_off_main_thread",
        "14_field_guide_launches_and_ranks.ipynb",
        "a-launcher-started-off-the-main-thread",
        "`signal.signal` called off the main thread (a launcher started in a thread): launch from the main thread",
    ),
    IndexEntry(
        "Failed to register signal handlers since torchelastic is running on a child thread.",
        "signal_off_main_thread",
        "14_field_guide_launches_and_ranks.ipynb",
        "a-launcher-started-off-the-main-thread",
        "torchelastic (torchrun, `elastic_launch`) started off the main thread: no signal reaches its"
        " workers, which are orphaned when the launcher is stopped",
    ),
    IndexEntry(
        "NameError: name 'args' is not defined",
        "global_from_main_block",
        "14_field_guide_launches_and_ranks.ipynb",
        "nameerror-in-a-worker-under-forkserver-python-3-14-s-default",
        'a worker reads a global made under `if __name__ == "__main__":`; fork copies it, spawn and'
        " forkserver (3.14's default) do not: pass it as an argument",
    ),
    IndexEntry(
        "RuntimeError: A SemLock created in a fork context is being shared with a process in a spawn context.",
        "lock_across_contexts",
        "14_field_guide_launches_and_ranks.ipynb",
        "appendix-d-python-3-14-s-forkserver-beyond-the-guard",
        'a Lock, Event, Semaphore or Queue of `get_context("fork")` passed to a spawn or forkserver child:'
        " make it with the child's context",
    ),
)
"""The index of error messages (docs/errors.md,
[10 · Appendix E](../notebooks/10_field_guide.ipynb#appendix-e-the-index-of-error-messages))."""


def error_index_markdown(prefix: str = "notebooks/") -> str:
    """The index as a Markdown table, as docs/errors.md and
    [10 · Appendix E](../notebooks/10_field_guide.ipynb#appendix-e-the-index-of-error-messages) show it; links
    are ``prefix`` + the notebook's file name (``""`` from inside notebooks/).

    >>> error_index_markdown().splitlines()[0]
    '| message | what it means | where |'
    """
    rows = ["| message | what it means | where |", "|---|---|---|"]
    for entry in ERROR_INDEX:
        where = f"[notebook {entry.notebook[:2]}]({prefix}{entry.notebook}#{entry.section})"
        rows.append(f"| `{entry.message}` | {entry.meaning} | {where} |")
    return "\n".join(rows)


def preload_ddp() -> float:
    """Import what ``DistributedDataParallel``'s constructor imports (``torch._dynamo``), once, in
    this process; returns the seconds it took. Forked ranks inherit it (notebook 10's setup).

    With torch 2.15.0 (also 2.13.0) the first ``DDP(model)`` of a process imports ``torch._dynamo``
    (hundreds of modules, seconds on a busy 2-core machine); spawn children pay it in every rank.

    >>> preload_ddp() >= 0
    True
    """
    start = time.perf_counter()
    import torch._dynamo  # noqa: F401  (what DDP's constructor imports: see the docstring)

    return time.perf_counter() - start


def train_uneven(
    rank: int, world_size: int, port: int, batches: Sequence[int], use_join: bool, timeout: float
) -> None:
    """DDP on gloo where rank ``r`` trains ``batches[r]`` batches, then all meet at a barrier
    ([10 · Uneven inputs](../notebooks/10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs)). Without
    ``use_join`` the rank with more batches waits in backward's
    all-reduce for ranks that are gone to the barrier: a hang, ended by the group's ``timeout``.
    With it, the loop runs inside ``Join([model])``. Each rank prints its bias gradient per step:
    8.0 while every rank trains, 8.0 / world_size once the others have joined (they add zeros).

    >>> import torch
    >>> from helpers.ddp import free_port
    >>> threads = torch.get_num_threads()  # train_uneven sets one thread
    >>> train_uneven(0, 1, free_port(), [2], use_join=True, timeout=30)  # doctest: +ELLIPSIS
    rank 0: bias gradients [8.0, 8.0], weights ...
    >>> torch.set_num_threads(threads)
    """
    import torch  # inside: importing this module stays cheap for workers without torch
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    url, limit = f"tcp://127.0.0.1:{port}", timedelta(seconds=timeout)
    dist.init_process_group("gloo", url, rank=rank, world_size=world_size, timeout=limit)
    try:
        model = DDP(torch.nn.Linear(4, 1))  # rank 0's random weights, copied to every rank
        optimizer, gradients = torch.optim.SGD(model.parameters(), lr=0.1), []
        with Join([model]) if use_join else nullcontext():  # nullcontext: a `with` that does nothing
            for _ in range(batches[rank]):
                optimizer.zero_grad()
                model(torch.ones(8, 4)).sum().backward()  # DDP averages the gradients: every rank
                gradients.append(model.module.bias.grad.item())  # 8.0 on each rank before the average
                optimizer.step()
        dist.barrier()  # e.g. before rank 0 saves a checkpoint
        print(f"rank {rank}: bias gradients {gradients}, weights {model.module.weight.sum():.4f}\n", end="")
    finally:
        dist.destroy_process_group()


def metric_in_join(rank: int, world_size: int, port: int, timeout: float) -> None:
    """The bug of [10 · Uneven inputs](../notebooks/10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs):
    uneven inputs inside ``Join``, plus the loss all-reduced
    in the loop to log it. ``Join`` answers only DDP's collectives: on a rank that has joined, this
    all-reduce meets ``Join``'s own collectives, so the ranks fail (a collective mismatch) or wait
    until the group's ``timeout``. The fix, in ``patterns/10_uneven_inputs.py``: sum the loss on
    each rank and all-reduce once, after the ``with`` block.

    >>> from helpers.ddp import free_port
    >>> metric_in_join(0, 1, free_port(), timeout=30)  # a world of one: nobody joins early
    """
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel as DDP

    url, limit = f"tcp://127.0.0.1:{port}", timedelta(seconds=timeout)
    dist.init_process_group("gloo", url, rank=rank, world_size=world_size, timeout=limit)
    try:
        model = DDP(torch.nn.Linear(4, 1))
        with Join([model]):
            for _ in range(3 + rank):  # uneven: rank 0 joins first
                loss = model(torch.ones(8, 4)).sum()
                loss.backward()  # DDP's all-reduce: Join answers it for a rank that is done
                dist.all_reduce(loss.detach())  # the bug: a collective that Join does not know
    finally:
        dist.destroy_process_group()


def reduce_metric(rank: int, world_size: int, port: int, timeout: float, on_every_rank: bool) -> None:
    """Sum a metric over the ranks with ``all_reduce``; the bug (``on_every_rank=False``) calls it
    under ``if rank == 0``, so rank 0 waits for partners that never come until the group's
    ``timeout`` ([10 · A collective called on one rank only](../notebooks/10_field_guide.ipynb#a-collective-called-on-one-rank-only)).

    >>> from helpers.ddp import free_port
    >>> reduce_metric(0, 1, free_port(), timeout=30, on_every_rank=False)  # a world of one: no partner
    rank 0: metric summed over 1 rank(s) = 1.0
    """
    import torch
    import torch.distributed as dist

    url, limit = f"tcp://127.0.0.1:{port}", timedelta(seconds=timeout)
    dist.init_process_group("gloo", url, rank=rank, world_size=world_size, timeout=limit)
    try:
        metric = torch.ones(1)
        if on_every_rank or rank == 0:  # the bug: `if rank == 0: dist.all_reduce(metric)`
            dist.all_reduce(metric)  # a collective: every rank of the group must call it
        else:
            time.sleep(timeout + 2)  # the other ranks go on with their work
        if rank == 0:
            print(f"rank 0: metric summed over {world_size} rank(s) = {metric.item()}")
    finally:
        dist.destroy_process_group()


@contextmanager
def stderr_of_children() -> Iterator[Callable[[], str]]:
    """Send this process's file descriptor 2 to a temp file while the block runs, so the children
    started inside write their tracebacks there; yields a function that returns what they wrote.
    [10 · Appendix B](../notebooks/10_field_guide.ipynb#appendix-b-pool-map-never-returns-a-worker-from-the-notebook)
    counts the tracebacks of Pool workers with it.

    >>> import subprocess, sys
    >>> with stderr_of_children() as written:
    ...     _ = subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('oops')"], timeout=60)
    >>> written()
    'oops'
    """
    if os.name == "posix":  # multiprocessing's long-lived helper must not keep the temp file as its stderr
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    with capture_fd_output() as read:
        text = ""
        try:
            yield lambda: text
        finally:
            text = read()


def _memory_cgroup_root() -> tuple[Path, int] | None:
    """This process's memory cgroup folder and the cgroup version (2 or 1), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/"), 1
    unified = [line.split(":", 2)[2] for line in lines if line.startswith("0::")]
    if unified and Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return Path("/sys/fs/cgroup") / unified[0].lstrip("/"), 2
    return None


def _swap_in_use() -> bool:
    """Whether this host has swap (``SwapTotal`` in ``/proc/meminfo`` above zero)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("SwapTotal:"):
                return int(line.split()[1]) > 0
    except OSError:
        pass
    return False


@contextmanager
def memory_cgroup(limit: int, name: str = "field-guide-oom") -> Iterator[Path | None]:
    """A child memory cgroup of this process's own, limited to ``limit`` bytes; removed on exit.

    Yields its folder, or None where one cannot be made (not Linux, not root, no memory
    controller). cgroup v2 sets ``memory.max`` and no swap; v1 sets ``memory.limit_in_bytes`` and,
    where the kernel accounts swap, ``memory.memsw.limit_in_bytes`` (memory plus swap); a v1 host
    with swap on and no swap accounting would swap instead of killing: None there too
    ([10 · Appendix G](../notebooks/10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer)).

    >>> with memory_cgroup(64 << 20) as folder:
    ...     folder is None or (folder / "cgroup.procs").exists()
    True
    """
    found = _memory_cgroup_root()
    folder = found[0] / f"{name}-{os.getpid()}" if found else None
    try:
        folder.mkdir()
        if found[1] == 2:
            (folder / "memory.max").write_text(str(limit))
            (folder / "memory.swap.max").write_text("0")
        else:
            (folder / "memory.limit_in_bytes").write_text(str(limit))
            if (folder / "memory.memsw.limit_in_bytes").exists():
                (folder / "memory.memsw.limit_in_bytes").write_text(str(limit))  # no swap either
            elif _swap_in_use():
                raise OSError("cgroup v1 without swap accounting on a host with swap")
    except (OSError, AttributeError):
        if folder is not None and folder.exists():
            folder.rmdir()
        yield None
        return
    try:
        yield folder
    finally:
        for _ in range(50):  # the killed process leaves the cgroup a moment after its death
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def oom_kills(folder: Path) -> int:
    """How many processes the OOM killer killed in cgroup ``folder``: ``oom_kill`` of ``memory.events``
    (cgroup v2) or ``memory.oom_control`` (v1), [10 · OOM](../notebooks/10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "memory.events").write_text("oom 1\\noom_kill 1\\n")
    ...     oom_kills(Path(d))
    1
    """
    events = folder / "memory.events"
    text = (events if events.exists() else folder / "memory.oom_control").read_text()
    return int(dict(line.split() for line in text.splitlines() if line.strip()).get("oom_kill", 0))


def allocate_in_cgroup(rank: int, folder: str, mib: int) -> None:
    """Move this process into cgroup ``folder``, then allocate and touch ``mib`` MiB. Past the cgroup's
    limit the kernel's OOM killer sends SIGKILL: no traceback, no ``finally``, only exit code -9.
    Used in [10 · Appendix G](../notebooks/10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:  # a folder that is no cgroup: only the allocation
    ...     allocate_in_cgroup(0, d, 1)
    rank 0 holds 1 MiB
    """
    Path(folder, "cgroup.procs").write_text(str(os.getpid()))  # as if the container had this limit
    memory = bytearray(mib << 20)  # zero-filled: every page is touched
    print(f"rank {rank} holds {len(memory) >> 20} MiB")


def sigkill_self(rank: int = 0) -> None:
    """The stand-in for the OOM killer where no cgroup can be made: this process sends itself
    SIGKILL, the signal the OOM killer sends. Not the kernel's decision: labelled. POSIX only; run it
    in a child ([10 · OOM](../notebooks/10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer)).

    >>> import multiprocessing
    >>> child = multiprocessing.get_context("spawn").Process(target=sigkill_self)
    >>> child.start(); child.join(60); child.exitcode
    -9
    """
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def blas_threads(limit: int | None = None) -> tuple[int, int]:
    """``(pid, threads)``: the threads of the largest BLAS pool in this process, as ``threadpoolctl``
    reports them, optionally capped at ``limit`` first
    ([10 · Appendix A](../notebooks/10_field_guide.ipynb#appendix-a-slow-nothing-fails-numpy-s-thread-pool-in-every-worker)).
    NumPy's OpenBLAS is the one a worker that imports only NumPy has; SciPy loads a second library with a pool of its
    own, capped the same way.

    >>> blas_threads(limit=1)[1]
    1
    """
    import numpy  # noqa: F401  (loads the BLAS library that threadpoolctl inspects)
    from threadpoolctl import threadpool_info, threadpool_limits

    if limit is not None:
        threadpool_limits(limit)  # the fix, in the worker: one BLAS thread per process
    pools = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    return os.getpid(), max((pool["num_threads"] for pool in pools), default=0)


def square(x: int) -> int:
    """One job for a spawn ``Pool``: defined in a module, so it imports.
    [10 · Appendix B](../notebooks/10_field_guide.ipynb#appendix-b-pool-map-never-returns-a-worker-from-the-notebook).

    >>> square(4)
    16
    """
    return x * x
