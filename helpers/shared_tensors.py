"""Workers and measurements for notebook 02 (sharing CPU tensors between processes).

Everything that runs in a child lives here, so spawn and forkserver children can import it. Every
worker sets its torch thread count before its first op (a fork child of a kernel that ran parallel
kernels hangs in GNU OpenMP otherwise; [04 · The CPU twin](../notebooks/04_fork_and_cuda.ipynb#the-cpu-twin-openmp-after-fork)).

Example::

    >>> import torch
    >>> from helpers.launch import FAST_METHOD, launch
    >>> from helpers.shared_tensors import add_in_place
    >>> t = torch.zeros(3).share_memory_()
    >>> _ = launch(add_in_place, args=(t,), nprocs=1, method=FAST_METHOD)
    >>> t.tolist()
    [1.0, 1.0, 1.0]
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import time
from pathlib import Path

import torch

from helpers.launch import FAST_METHOD, launch
from helpers.processes import dev_shm_entries

__all__ = [
    "memory_region",
    "add_in_place",
    "add_plus_equals",
    "add_and_rebind",
    "write_through_numpy",
    "nudge_weights",
    "increment_counter",
    "increment_own_slot",
    "RACE_MODES",
    "race_demo",
    "open_shm_fds",
    "strategy_footprint",
    "fd_limit_probe",
    "share_then_die",
    "torch_entries_of",
]


def memory_region(t: torch.Tensor) -> str:
    """Where ``t``'s storage lives: the ``/proc/self/maps`` region holding its first byte (Linux).

    A private allocation shows as ``[heap]`` or ``[anonymous]``; a shared one as
    ``/dev/shm/torch_... (deleted)`` (``file_descriptor``: unlinked at once, alive while mapped) or
    ``/dev/shm/torch_...`` (``file_system``). Returns ``"unknown (no /proc)"`` elsewhere.

    >>> memory_region(torch.zeros(1_000_000).share_memory_()).startswith("/dev/shm/torch_")
    True
    """
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return "unknown (no /proc)"
    address = t.untyped_storage().data_ptr()
    for line in maps.read_text().splitlines():
        parts = line.split(maxsplit=5)
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if start <= address < end:
            return parts[5] if len(parts) == 6 else "[anonymous]"
    return "[not mapped]"


def add_in_place(rank: int, t: torch.Tensor) -> None:
    """``t.add_(1)``: writes into the storage the parent shares.

    >>> x = torch.zeros(2); add_in_place(0, x); x.tolist()
    [1.0, 1.0]
    """
    torch.set_num_threads(1)
    t.add_(1)


def add_plus_equals(rank: int, t: torch.Tensor) -> None:
    """``t += 1``: also in place (``Tensor.__iadd__``), although it reads like a rebinding.

    >>> x = torch.zeros(2); add_plus_equals(0, x); x.tolist()
    [1.0, 1.0]
    """
    torch.set_num_threads(1)
    t += 1


def add_and_rebind(rank: int, t: torch.Tensor) -> None:
    """``t = t + 1``: a new tensor in this process; the shared storage is untouched.

    >>> x = torch.zeros(2); add_and_rebind(0, x); x.tolist()
    [0.0, 0.0]
    """
    torch.set_num_threads(1)
    t = t + 1  # noqa: F841 (the point: the name now refers to a private tensor)


def write_through_numpy(rank: int, t: torch.Tensor) -> None:
    """Write ``rank + 100`` at index ``rank`` through a NumPy view (``t.numpy()``, no copy).

    >>> x = torch.zeros(2); write_through_numpy(1, x); x.tolist()
    [0.0, 101.0]
    """
    torch.set_num_threads(1)
    view = t.numpy()
    view[rank] = rank + 100


def nudge_weights(rank: int, model: torch.nn.Module, amount: float = 1.0) -> None:
    """Add ``amount`` to every parameter of ``model`` in place (under ``no_grad``).

    >>> m = torch.nn.Linear(1, 1); before = m.bias.item(); nudge_weights(0, m, 0.5)
    >>> round(m.bias.item() - before, 4)
    0.5
    """
    torch.set_num_threads(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(amount)


def increment_counter(
    rank: int, counter: torch.Tensor, n: int, lock: contextlib.AbstractContextManager | None = None
) -> None:
    """Add 1 to ``counter[0]`` ``n`` times: read, yield the CPU, write (under ``lock`` if given).

    The yield (``time.sleep(0)``) widens the window between read and write, so that without a
    lock another process's increments land in it and are overwritten: lost updates, every run.
    ``t[0] += 1`` has the same race with a narrower window (it loses a few per 10,000).

    >>> c = torch.zeros(1, dtype=torch.int64); increment_counter(0, c, 5); int(c[0])
    5
    """
    torch.set_num_threads(1)
    guard = lock if lock is not None else contextlib.nullcontext()
    for _ in range(n):
        with guard:
            value = int(counter[0])
            time.sleep(0)
            counter[0] = value + 1


def increment_own_slot(rank: int, counts: torch.Tensor, n: int) -> None:
    """The lock-free fix: each rank increments only ``counts[rank]`` (same read/yield/write).

    >>> c = torch.zeros(2, dtype=torch.int64); increment_own_slot(1, c, 3); c.tolist()
    [0, 3]
    """
    torch.set_num_threads(1)
    for _ in range(n):
        value = int(counts[rank])
        time.sleep(0)
        counts[rank] = value + 1


RACE_MODES = ("no lock", "lock", "one slot per rank")


def _count_in_processes(
    nprocs: int = 2, n: int = 2000, mode: str = "no lock", method: str = FAST_METHOD, timeout: float = 60.0
) -> dict:
    """``nprocs`` processes each add 1 ``n`` times to a shared count; how many updates survive?

    ``mode`` is one of :data:`RACE_MODES`. Returns ``expected``, ``counted``, ``lost`` and
    ``seconds`` (wall time including process start-up).

    >>> _count_in_processes(2, 50, mode="lock", method=FAST_METHOD)["lost"]
    0
    """
    if mode not in RACE_MODES:
        raise ValueError(f"mode must be one of {RACE_MODES}, got {mode!r}")
    if nprocs < 1 or n < 1:
        raise ValueError(f"nprocs and n must be at least 1, got {nprocs}, {n}")
    start = time.perf_counter()
    if mode == "one slot per rank":
        counts = torch.zeros(nprocs, dtype=torch.int64).share_memory_()
        launch(increment_own_slot, args=(counts, n), nprocs=nprocs, method=method, timeout=timeout)
        counted = int(counts.sum())
    else:
        counter = torch.zeros(1, dtype=torch.int64).share_memory_()
        lock = mp.get_context(method).Lock() if mode == "lock" else None
        launch(increment_counter, args=(counter, n, lock), nprocs=nprocs, method=method, timeout=timeout)
        counted = int(counter[0])
    expected = nprocs * n
    return {
        "mode": mode,
        "nprocs": nprocs,
        "expected": expected,
        "counted": counted,
        "lost": expected - counted,
        "seconds": time.perf_counter() - start,
    }


def race_demo(nprocs: int = 2, mode: str = "no lock", n: int = 2000, method: str = FAST_METHOD) -> dict:
    """Widget callback for notebook 02: run :func:`_count_in_processes`, draw expected vs counted.

    >>> race_demo(2, "one slot per rank", n=20, method=FAST_METHOD)["lost"]
    0
    """
    import matplotlib.pyplot as plt

    from helpers.plotting import bar_chart, new_figure

    result = _count_in_processes(nprocs, n, mode=mode, method=method)
    fig, ax = new_figure(f"{nprocs} processes, {mode}: {result['lost']:,} updates lost", "", "count")
    bar_chart(
        ax,
        ["expected", "counted"],
        [result["expected"], result["counted"]],
        fmt="{:,.0f}",
        colors=["#999999", "#1b9e77" if result["lost"] == 0 else "#d95f02"],
    )
    plt.show()
    return result


def open_shm_fds() -> int:
    """How many of this process's open file descriptors point into ``/dev/shm`` (Linux; 0 elsewhere).
    Notebook 02, appendix: one per shared *storage*, however many tensors view it.

    >>> before = open_shm_fds(); t = torch.zeros(8).share_memory_(); views = [t[:2], t[2:]]
    >>> open_shm_fds() - before
    1
    """
    if not Path("/proc/self/fd").exists():
        return 0
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/shm/")
    return count


def strategy_footprint(rank: int, strategy: str, count: int = 50) -> dict:
    """In this child: share ``count`` small tensors under ``strategy``; count fds and names (Linux).

    Sets the process-global strategy, so run it in a child. Notebook 02, appendix.

    >>> launch(strategy_footprint, args=("file_descriptor", 3), method=FAST_METHOD)[0]["shm_fds"]
    3
    """
    import torch.multiprocessing as tmp

    torch.set_num_threads(1)
    tmp.set_sharing_strategy(strategy)
    fds_before = open_shm_fds()
    tensors = [torch.zeros(16).share_memory_() for _ in range(count)]
    report = {
        "pid": os.getpid(),
        "shm_fds": open_shm_fds() - fds_before,
        "dev_shm_names": len(torch_entries_of(os.getpid())),
    }
    del tensors
    gc.collect()
    report["dev_shm_names_after_free"] = len(torch_entries_of(os.getpid()))
    return report


def fd_limit_probe(rank: int, strategy: str, limit: int = 128, count: int = 300) -> dict:
    """In this child: lower the open-file limit to ``limit``, then share up to ``count`` tensors.

    Returns how many, the error (or None) and the fds open at the start. Sets the process-global
    strategy and limit, so run it in a child (Linux). Notebook 02, appendix.

    >>> launch(fd_limit_probe, args=("file_system", 64, 80), method=FAST_METHOD)[0]["created"]
    80
    """
    import resource

    torch.set_num_threads(1)
    torch.multiprocessing.set_sharing_strategy(strategy)
    report = {"limit": limit, "pid": os.getpid(), "open_at_start": len(os.listdir("/proc/self/fd"))}
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    tensors, report["error"] = [], None
    try:
        for _ in range(count):
            tensors.append(torch.zeros(16).share_memory_())
    except RuntimeError as error:
        report["error"] = str(error)
    report["created"] = len(tensors)
    del tensors  # free them here: file_system names must not outlive the probe
    gc.collect()
    return report


def share_then_die(rank: int, count: int = 5) -> None:
    """Share ``count`` tensors under ``file_system``, then kill this process with SIGKILL (Linux).
    Notebook 02, appendix: who removes the names a crashed process leaves in ``/dev/shm``.

    No ``finally``, no destructor runs: the names stay until ``torch_shm_manager`` removes them.

    >>> import torch.multiprocessing as tmp
    >>> child = tmp.get_context(FAST_METHOD).Process(target=share_then_die, args=(0, 2))
    >>> child.start(); child.join(timeout=60); child.exitcode
    -9
    >>> deadline = time.monotonic() + 15
    >>> while torch_entries_of(child.pid) and time.monotonic() < deadline:
    ...     time.sleep(0.1)
    >>> torch_entries_of(child.pid)
    []
    """
    import signal

    torch.set_num_threads(1)
    torch.multiprocessing.set_sharing_strategy("file_system")
    keep = [torch.zeros(16).share_memory_() for _ in range(count)]  # noqa: F841 (alive at the kill)
    os.kill(os.getpid(), signal.SIGKILL)


def torch_entries_of(pid: int) -> list[str]:
    """``/dev/shm`` names that torch created in process ``pid`` (``torch_<pid>_...``).

    >>> torch_entries_of(os.getpid())
    []
    """
    return sorted(name for name in dev_shm_entries() if name.startswith(f"torch_{pid}_"))
