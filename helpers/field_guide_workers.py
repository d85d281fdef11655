"""Notebook 13, the field guide for workers, the machine and other platforms: the code its children run.

Every function or class that
[13 · From the symptom to the case](../notebooks/13_field_guide_workers_and_machine.ipynb#from-the-symptom-to-the-case)
starts in another process lives here (spawn and forkserver children import their target by module
and name), and the notebook displays each one before it runs. The module is import-light like
:mod:`helpers.field_guide`: torch is imported inside the functions that need it. It also reads the
facts of other platforms from the installed torch (:func:`platform_facts`, :func:`torch_text`), as
notebook 04 reads CUDA's.

Example::

    >>> from helpers.field_guide_workers import platform_facts
    >>> "gloo" in platform_facts()["backends"]
    True
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the module stays import-light
    from multiprocessing.queues import Queue, SimpleQueue

    import torch

__all__ = [
    "platform_facts",
    "torch_text",
    "follow_weights",
    "count_torn_copies",
    "SentOnce",
    "maps_of_this_process",
    "shared_storages_until_full",
    "write_records",
    "RecordsOpenedInInit",
    "RecordsOpenedPerWorker",
    "StartsAProcess",
    "ThreadsInWorker",
]


def platform_facts() -> dict:
    """What this torch has that differs between Linux, macOS and Windows, read live: the
    distributed backends, whether a ``TCPStore`` here uses libuv, the sharing strategies and the
    default start method.
    [13 · Windows and macOS](../notebooks/13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has).

    >>> sorted(platform_facts())
    ['backends', 'default_start_method', 'platform', 'sharing_strategies', 'store_uses_libuv']
    """
    import multiprocessing
    from datetime import timedelta

    import torch.distributed as dist
    import torch.multiprocessing as mp

    checks = {"nccl": dist.is_nccl_available, "gloo": dist.is_gloo_available, "mpi": dist.is_mpi_available}
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=10))  # a free port, this process
    return {
        "platform": sys.platform,
        "backends": sorted(name for name, available in checks.items() if available()),
        "store_uses_libuv": store.libuvBackend,
        "sharing_strategies": sorted(mp.get_all_sharing_strategies()),
        "default_start_method": multiprocessing.get_start_method(allow_none=True) or "not chosen yet",
    }


def torch_text(relative: str, words: str, after: int = 0) -> str:
    """The lines of the installed torch's file ``relative`` (under torch/) from the first line that
    contains ``words``, plus ``after`` more; a shared library is searched for the printable string.
    Notebook 13 reads with it what only another platform or a GPU prints.

    >>> torch_text("multiprocessing/__init__.py", 'sys.platform == "darwin"')
    'if sys.platform == "darwin" or sys.platform == "win32":'
    """
    import torch

    path = Path(torch.__file__).parent / relative
    if path.suffix == ".py":
        lines = path.read_text().splitlines()
        at = next(i for i, line in enumerate(lines) if words in line)
        return "\n".join(lines[at : at + after + 1]).strip()
    data = path.read_bytes()
    at = data.index(words.encode())
    start, end = data.rfind(b"\0", 0, at) + 1, data.index(b"\0", at)
    return data[start:end].decode()


def follow_weights(
    actor: int,
    weights: torch.Tensor,
    version: torch.Tensor,
    lock: AbstractContextManager,
    seen: Queue,
    rounds: int,
    deadline: float,
) -> None:
    """An actor: each time ``version`` (a shared one-element tensor) moves on, copy the shared
    ``weights`` under ``lock`` and report ``(actor, version, consistent)`` on ``seen``; stop after
    ``rounds`` versions or at the deadline (seconds).
    [13 · Weights to actors](../notebooks/13_field_guide_workers_and_machine.ipynb#weights-from-a-trainer-to-actors).

    In this process, with version 1 already published (a thread's lock and queue stand in):

    >>> import queue, threading, torch
    >>> seen = queue.Queue()
    >>> follow_weights(0, torch.ones(4), torch.tensor(1), threading.Lock(), seen, rounds=1, deadline=5)
    >>> seen.get(timeout=5)
    (0, 1, True)
    """
    import torch

    torch.set_num_threads(1)
    last, stop = 0, time.monotonic() + deadline
    while last < rounds and time.monotonic() < stop:
        if int(version) == last:  # nothing new: poll (a real actor acts meanwhile)
            time.sleep(0.005)
            continue
        with lock:  # the trainer writes under the same lock: a whole version or none
            local = weights.clone()
            last = int(version)
        seen.put((actor, last, bool((local == last).all())))


def count_torn_copies(
    weights: torch.Tensor, lock: AbstractContextManager | None, seconds: float, results: SimpleQueue
) -> None:
    """An actor that copies the shared ``weights`` for ``seconds`` (under ``lock``, or with none) while a
    trainer fills them in place, and reports ``(copies, torn)``: a torn copy holds two versions at once.
    [13 · Appendix F](../notebooks/13_field_guide_workers_and_machine.ipynb#appendix-f-a-torn-copy-live).

    >>> import queue, torch
    >>> results = queue.SimpleQueue()
    >>> count_torn_copies(torch.ones(4), None, 0.05, results)
    >>> results.get(timeout=5)[1]
    0
    """
    import torch

    torch.set_num_threads(1)
    copies = torn = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        with lock or contextlib.nullcontext():  # the lock the trainer writes under, or none
            local = weights.clone()
        copies += 1
        torn += bool(local.min() != local.max())  # the trainer fills with one value per step
    results.put((copies, torn))


class SentOnce:
    """Stands in for a CUDA tensor's rule on CPU: it may be pickled again only in the process that
    made it (torch refuses to send a CUDA tensor that a process only received).
    [13 · Weights to actors](../notebooks/13_field_guide_workers_and_machine.ipynb#weights-from-a-trainer-to-actors).

    >>> import pickle; pickle.loads(pickle.dumps(SentOnce(3))).value
    3
    """

    def __init__(self, value: int, maker: int | None = None):
        self.value, self.maker = value, os.getpid() if maker is None else maker

    def __reduce__(self):
        if os.getpid() != self.maker:
            raise RuntimeError("Attempted to send an object received from another process (the CUDA rule)")
        return (SentOnce, (self.value, self.maker))


def maps_of_this_process() -> int:
    """How many memory mappings this process has (lines of /proc/self/maps; Linux).
    [13 · The map count](../notebooks/13_field_guide_workers_and_machine.ipynb#unable-to-mmap-cannot-allocate-memory-12-the-map-count).

    >>> sys.platform != "linux" or maps_of_this_process() > 0
    True
    """
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


def _fill_map_table(leave: int) -> None:
    """Mappings of one page each (reserved, never touched: no memory) until ``leave`` remain."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype, libc.mprotect.restype = ctypes.c_void_p, ctypes.c_int
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    limit = int(Path("/proc/sys/vm/max_map_count").read_text())
    count, page = max(limit - maps_of_this_process() - leave, 0) // 2, mmap.PAGESIZE  # 2 per pair
    base = libc.mmap(None, 2 * count * page, mmap.PROT_READ | mmap.PROT_WRITE, 0x22 | 0x4000, -1, 0)
    for i in range(count):  # every other page read-only: the kernel cannot merge them into one
        libc.mprotect(base + 2 * i * page, page, mmap.PROT_READ)


def shared_storages_until_full(rank: int, leave: int, results: SimpleQueue) -> None:
    """In a child: use up the map table but ``leave`` entries, then share one small tensor after
    another, as a Queue's ``put`` does, until a mapping is refused; report how many, and the error.
    [13 · The map count](../notebooks/13_field_guide_workers_and_machine.ipynb#unable-to-mmap-cannot-allocate-memory-12-the-map-count).
    Linux only; never call it in a process you keep (it fills that process's map table).

    >>> import multiprocessing
    >>> ctx = multiprocessing.get_context("fork")  # doctest: +SKIP
    >>> results = ctx.SimpleQueue()  # doctest: +SKIP
    >>> child = ctx.Process(target=shared_storages_until_full, args=(0, 40, results))  # doctest: +SKIP
    >>> child.start(); made, error = results.get(); child.join(timeout=60)  # doctest: +SKIP
    >>> "Cannot allocate memory (12)" in error  # doctest: +SKIP
    True
    """
    import torch

    _fill_map_table(leave)
    shared = []
    try:
        while len(shared) < 2 * leave:
            shared.append(torch.zeros(1).share_memory_())  # one mapping per storage
        results.put((len(shared), "no error"))
    except RuntimeError as error:  # torch made the segment, then could not map it: it stays behind
        Path("/dev/shm", str(error).split("</", 1)[1].split(">", 1)[0]).unlink(missing_ok=True)
        results.put((len(shared), str(error)))


RECORD = 8  # bytes per record: its index, as 8 ASCII digits


def write_records(path: str | Path, count: int) -> Path:
    """A file of ``count`` fixed-size records, record ``i`` holding the number ``i``.
    [13 · A file opened in __init__](../notebooks/13_field_guide_workers_and_machine.ipynb#a-file-opened-in-init-and-shared-by-fork-workers).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_records(Path(folder) / "r", 3).read_bytes()[8:16]
    b'00000001'
    """
    Path(path).write_bytes(b"".join(f"{i:0{RECORD}d}".encode() for i in range(count)))
    return Path(path)


class RecordsOpenedInInit:
    """The bug: one file object opened in ``__init__``; forked DataLoader workers share its offset.
    [13 · A file opened in __init__](../notebooks/13_field_guide_workers_and_machine.ipynb#a-file-opened-in-init-and-shared-by-fork-workers).
    """

    def __init__(self, path: str, count: int, pause: float = 0.0):
        self.file, self.count, self.pause = open(path, "rb", buffering=0), count, pause  # noqa: SIM115 (the bug)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> int:
        self.file.seek(i * RECORD)  # the offset lives in the kernel, shared after fork
        time.sleep(self.pause)  # widens the window between seek and read (a slow decode)
        return int(self.file.read(RECORD))


class RecordsOpenedPerWorker:
    """The fix: open the file lazily, once in each process that reads (its own offset).
    [13 · A file opened in __init__](../notebooks/13_field_guide_workers_and_machine.ipynb#a-file-opened-in-init-and-shared-by-fork-workers).
    """

    def __init__(self, path: str, count: int, pause: float = 0.0):
        self.path, self.count, self.pause, self.file, self.pid = path, count, pause, None, None

    def __len__(self) -> int:
        return self.count

    def __getstate__(self) -> dict:
        """What pickling sends to a spawn or forkserver worker: everything but the handle, which a
        file cannot cross (the main process may have opened one by reading a record first)."""
        return {**self.__dict__, "file": None, "pid": None}

    def __getitem__(self, i: int) -> int:
        if self.pid != os.getpid():  # first call in this worker: a handle of its own
            self.file, self.pid = open(self.path, "rb", buffering=0), os.getpid()  # noqa: SIM115 (kept open)
        self.file.seek(i * RECORD)
        time.sleep(self.pause)
        return int(self.file.read(RECORD))


class StartsAProcess:
    """A Dataset whose ``__getitem__`` starts a process, as a pool or a library's workers do
    inside a DataLoader worker (a daemonic process).
    [13 · Compiling in workers](../notebooks/13_field_guide_workers_and_machine.ipynb#daemonic-processes-are-not-allowed-to-have-children).
    """

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> int:
        import multiprocessing

        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,))
        child.start()  # in a daemonic worker: AssertionError before anything starts
        child.join(timeout=10)
        return child.exitcode


class ThreadsInWorker:
    """The fix for :class:`StartsAProcess`: the work of ``__getitem__`` in threads of the worker (a daemon
    may start threads), here the squares of four numbers. No ``__len__``: give the DataLoader a sampler.
    [13 · Daemonic](../notebooks/13_field_guide_workers_and_machine.ipynb#daemonic-processes-are-not-allowed-to-have-children).

    >>> ThreadsInWorker()[0]
    14
    """

    def __getitem__(self, i: int) -> int:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=2) as pool:  # threads, not processes: allowed in a daemon
            return sum(pool.map(lambda x: x * x, range(4)))
