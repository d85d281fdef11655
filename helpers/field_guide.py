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
    "other_platform": "Windows or macOS: [13 · Windows and macOS]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has)",
    "cuda_resent": "a CUDA tensor sent on: [13 · Weights to actors]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#weights-from-a-trainer-to-actors)",
    "map_count": "one mapping per shared storage: [13 · The map count]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#unable-to-mmap-cannot-allocate-memory-12-the-map-count)",
    "daemonic_worker": "a process started in a DataLoader worker: [13 · Daemonic]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#daemonic-processes-are-not-allowed-to-have-children)",
    "cuda_ipc_container": "CUDA IPC in a container: [13 · Appendix B]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#appendix-b-cuda-between-processes-on-a-gpu)",
    "dataloader_option": "a DataLoader option: [13 · Appendix E]("
    "../notebooks/13_field_guide_workers_and_machine.ipynb#appendix-e-three-dataloader-options)",
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
        "RuntimeError: Distributed package doesn't have NCCL built in",
        "other_platform",
        "13_field_guide_workers_and_machine.ipynb",
        "windows-and-macos-what-this-torch-has",
        '`backend="nccl"` on a build without NCCL (Windows, macOS, CPU-only builds): use gloo there',
    ),
    IndexEntry(
        "RuntimeError: use_libuv was requested but PyTorch was built without libuv support, run with USE_LIBUV=0 "
        "to disable it.",
        "other_platform",
        "13_field_guide_workers_and_machine.ipynb",
        "windows-and-macos-what-this-torch-has",
        "a TCPStore (torchrun's too) asks for libuv, the default since torch 2.4, on a Windows build without it:"
        " `USE_LIBUV=0` (older torch: `was build without libuv support`)",
    ),
    IndexEntry(
        "RuntimeError: _share_filename_: only available on CPU",
        "other_platform",
        "13_field_guide_workers_and_machine.ipynb",
        "windows-and-macos-what-this-torch-has",
        "a non-CPU tensor (MPS on macOS) through a queue or out of a DataLoader worker: sharing by file name"
        " is for CPU storages; return CPU tensors, move batches in the loop",
    ),
    IndexEntry(
        "Attempted to send CUDA tensor received from another process; this is not currently supported. "
        "Consider cloning before sending.",
        "cuda_resent",
        "13_field_guide_workers_and_machine.ipynb",
        "weights-from-a-trainer-to-actors",
        "a process re-sends a CUDA tensor it only received (a `Manager().Queue()`'s server does, in a"
        " `RemoteError`): a torch Queue from the sender, or `clone()` before sending on",
    ),
    IndexEntry(
        "RuntimeError: unable to mmap 4 bytes from file </torch_4242_1234_43>: Cannot allocate memory (12)",
        "map_count",
        "13_field_guide_workers_and_machine.ipynb",
        "unable-to-mmap-cannot-allocate-memory-12-the-map-count",
        "the process holds `vm.max_map_count` mappings (one per shared storage), memory to spare: fewer,"
        " larger storages, or raise the sysctl",
    ),
    IndexEntry(
        "AssertionError: daemonic processes are not allowed to have children",
        "daemonic_worker",
        "13_field_guide_workers_and_machine.ipynb",
        "daemonic-processes-are-not-allowed-to-have-children",
        "a DataLoader worker (a daemon) starts a process: a pool, a library's workers, a compile; do it in"
        " the main process",
    ),
    IndexEntry(
        "RuntimeError: Inductor async compile process pools are disabled in daemonic multiprocessing processes.",
        "daemonic_worker",
        "13_field_guide_workers_and_machine.ipynb",
        "appendix-c-inductor-s-compile-workers",
        "`torch.compile` in a DataLoader worker with a multiprocessing `worker_start_method`: compile in the"
        " main process, or `TORCHINDUCTOR_WORKER_START=subprocess`",
    ),
    IndexEntry(
        "The kernel on this machine does not support the pidfd_getfd syscall needed to use IPC for CUDA tensors "
        "when expandable_segments:True is set.",
        "cuda_ipc_container",
        "13_field_guide_workers_and_machine.ipynb",
        "appendix-b-cuda-between-processes-on-a-gpu",
        "CUDA IPC with `expandable_segments` where `pidfd_getfd` is missing or denied (old kernel, a"
        " container without ptrace): `expandable_segments:False`, or allow ptrace",
    ),
    IndexEntry(
        "UserWarning: pin_memory_device is deprecated, the current accelerator will be used as the device",
        "dataloader_option",
        "13_field_guide_workers_and_machine.ipynb",
        "appendix-e-three-dataloader-options",
        "`DataLoader(pin_memory_device=...)` is deprecated and ignored (torch 2.15.0: the current accelerator pins): drop it",
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
