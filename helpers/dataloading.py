"""Datasets and measurements for notebook 07 (DataLoader workers).

Every Dataset here is a top-level class in an importable module: a ``spawn`` or ``forkserver``
DataLoader worker unpickles the dataset, which means importing its class by module and name.
Every function that creates worker processes passes ``multiprocessing_context=`` explicitly and
leaves no worker behind (the iterator is exhausted or deleted before it returns).

Example::

    >>> from torch.utils.data import DataLoader
    >>> from helpers.dataloading import SlowSquares
    >>> loader = DataLoader(SlowSquares(4, work=10), batch_size=2, num_workers=0)
    >>> [batch.tolist() for batch in loader]
    [[0, 1], [4, 9]]
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from helpers.launch import FAST_METHOD
from helpers.processes import live_children

__all__ = [
    "SlowSquares",
    "WhoLoadedMe",
    "Numbers",
    "ShardedNumbers",
    "RandomDraws",
    "OwnGenerator",
    "seed_own_generator",
    "CountingDataset",
    "Records",
    "SignalsInWorker",
    "explore_loader",
    "collect",
    "worker_memory",
]


class SlowSquares(Dataset):
    """Item ``i`` is ``i * i``, after ``work`` iterations of pure-Python busy work (a CPU-bound transform)
    and an optional ``delay`` in seconds of sleep (waiting on I/O).

    Pure Python holds the GIL, so threads could not speed this up; worker processes can
    ([07 · What workers buy](../notebooks/07_dataloader_workers.ipynb#what-workers-buy-loading-in-parallel-with-training)
    and
    [07 · Worker options](../notebooks/07_dataloader_workers.ipynb#worker-options-persistent-workers-prefetch-factor-pin-memory-timeout)).

    >>> SlowSquares(3, work=10)[2]
    tensor(4)
    """

    def __init__(self, n: int, work: int = 20_000, delay: float = 0.0):
        if n < 0 or work < 0 or delay < 0:
            raise ValueError(f"n, work and delay must be >= 0, got n={n}, work={work}, delay={delay}")
        self.n, self.work, self.delay = n, work, delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.delay)  # stands in for a slow disk or network read (0 by default)
        acc = 0
        for k in range(self.work):  # stands in for decoding, augmenting, tokenizing...
            acc = (acc + k * k) % 1_000_003
        return torch.tensor(i * i + 0 * acc)


class WhoLoadedMe(Dataset):
    """Item ``i`` says which worker produced it: ``(i, worker id, num_workers, pid)``.

    The worker id is -1 in the main process (no workers).

    [07 · Who loaded this sample?](../notebooks/07_dataloader_workers.ipynb#who-loaded-this-sample-get-worker-info) (and notebook 08).

    >>> WhoLoadedMe(2)[1][:3]
    (1, -1, 0)
    """

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple:
        info = get_worker_info()  # None in the main process
        return (i, info.id if info else -1, info.num_workers if info else 0, os.getpid())


class Numbers(IterableDataset):
    """The numbers ``0..n-1``, with no sharding: every worker gets a copy and yields them all.

    Used in [07 · `IterableDataset`](../notebooks/07_dataloader_workers.ipynb#iterabledataset-every-worker-yields-everything-unless-you-shard).

    >>> list(Numbers(3))
    [0, 1, 2]
    """

    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


class ShardedNumbers(Numbers):
    """The numbers ``0..n-1``, split between workers with ``get_worker_info()``: each yielded once.

    Worker ``k`` of ``W`` takes ``k, k+W, k+2W, ...``.

    Used in [07 · `IterableDataset`](../notebooks/07_dataloader_workers.ipynb#iterabledataset-every-worker-yields-everything-unless-you-shard).

    >>> list(ShardedNumbers(3))  # in the main process there is no worker info: all of them
    [0, 1, 2]
    """

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class RandomDraws(Dataset):
    """Item ``i`` is one draw from each global RNG: ``(numpy, random, torch)``.

    Before PyTorch 1.9 every forked worker inherited the same NumPy RNG state and drew the same
    "random" numbers; today each worker's NumPy, ``random`` and torch RNGs are seeded differently.

    Used in [07 · Random augmentations that repeat](../notebooks/07_dataloader_workers.ipynb#random-augmentations-that-repeat-from-run-to-run).

    >>> len(RandomDraws(2)[0])
    3
    """

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[int, int, int]:
        return int(np.random.randint(2**31)), random.randrange(2**31), int(torch.randint(2**31, ()))


class OwnGenerator(Dataset):
    """Item ``i`` is a draw from the Dataset's own NumPy ``Generator``, ``self.rng``, made in ``__init__``.

    The DataLoader seeds each worker's torch, ``random`` and global NumPy RNGs, not an RNG object a
    Dataset holds: every worker gets a copy of ``rng`` in the same state (forked, or pickled under
    spawn), so the workers draw the same numbers. :func:`seed_own_generator` fixes that.

    Used in
    [07 · Appendix: an RNG the DataLoader does not seed](../notebooks/07_dataloader_workers.ipynb#appendix-an-rng-the-dataloader-does-not-seed).

    >>> OwnGenerator(2)[0] == OwnGenerator(2)[1]  # two copies in the same state
    True
    """

    def __init__(self, n: int, seed: int = 0):
        self.n, self.rng = n, np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return int(self.rng.integers(2**31))


def seed_own_generator(worker_id: int) -> None:
    """``worker_init_fn`` for :class:`OwnGenerator`: give this worker's copy of the Dataset a Generator
    seeded from the worker's seed (``get_worker_info().seed``: the DataLoader's base seed plus the
    worker id, so a seeded ``generator=`` makes it reproducible). For an RNG the DataLoader does not
    seed; torch, ``random`` and NumPy's global RNG it seeds itself (PyTorch >= 1.9).

    Used in
    [07 · Appendix: an RNG the DataLoader does not seed](../notebooks/07_dataloader_workers.ipynb#appendix-an-rng-the-dataloader-does-not-seed).

    >>> seed_own_generator(0)  # in the main process there is no worker: nothing to do
    """
    info = get_worker_info()  # None outside a worker
    if info is not None:
        info.dataset.rng = np.random.default_rng(info.seed)


def collect(loader: DataLoader) -> list:
    """Iterate ``loader`` to the end and return the items, unbatched (each row of each batch).

    Iterating to the end shuts non-persistent workers down, so nothing is left behind.

    Used in [07 · Who loaded this sample?](../notebooks/07_dataloader_workers.ipynb#who-loaded-this-sample-get-worker-info) and
    [07 · Random augmentations that repeat](../notebooks/07_dataloader_workers.ipynb#random-augmentations-that-repeat-from-run-to-run).

    >>> collect(DataLoader(Numbers(3), batch_size=2))
    [0, 1, 2]
    """
    items = []
    for batch in loader:
        if isinstance(batch, (list, tuple)):  # a tuple item is collated into a list of columns
            items.extend(zip(*[column.tolist() for column in batch], strict=True))
        else:
            items.extend(batch.tolist())
    return items


def _measure_throughput(
    num_workers: int,
    n: int = 256,
    batch_size: int = 16,
    work: int = 20_000,
    method: str = FAST_METHOD,
    train_step: Callable[[torch.Tensor], object] | None = None,
) -> float:
    """Samples per second for one epoch of :class:`SlowSquares` (worker start-up included); this
    process runs ``train_step(batch)`` on every batch when given. For :func:`explore_loader`.

    >>> _measure_throughput(0, n=8, batch_size=4, work=10, train_step=lambda batch: batch * 2) > 0
    True
    """
    loader = DataLoader(  # DataLoader itself refuses num_workers < 0 and batch_size < 1 (ValueError)
        SlowSquares(n, work),
        batch_size=batch_size,
        num_workers=num_workers,
        multiprocessing_context=method if num_workers else None,
    )
    start = time.perf_counter()
    for batch in loader:
        if train_step is not None:
            train_step(batch)
    return n / (time.perf_counter() - start)


def explore_loader(num_workers: int = 2, batch_size: int = 16) -> float:
    """Widget callback of notebook 07's appendix on loading alone: measure and print the loading rate for one setting.

    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as printed:
    ...     rate = explore_loader(0, 16)
    >>> rate > 0, printed.getvalue().startswith("0 workers, batch 16:")
    (True, True)
    """
    rate = _measure_throughput(num_workers, n=128, batch_size=batch_size)
    print(f"{num_workers} workers, batch {batch_size}: {rate:,.0f} samples/s")
    return rate


class CountingDataset(Dataset):
    """Counts, in a shared ``multiprocessing.Value``, how many items the workers have loaded.

    Used in [07 · Appendix: `prefetch_factor`, counted](../notebooks/07_dataloader_workers.ipynb#appendix-prefetch-factor-counted).

    >>> import multiprocessing as mp
    >>> ds = CountingDataset(3, mp.get_context("spawn").Value("i", 0))
    >>> ds[0], ds.loaded.value
    (0, 1)
    """

    def __init__(self, n: int, loaded):
        self.n, self.loaded = n, loaded

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        with self.loaded.get_lock():
            self.loaded.value += 1
        return i


class SignalsInWorker(Dataset):
    """Every item makes the worker that loads it send itself ``signum``
    ([08 · Appendix C](../notebooks/08_debugging_and_pitfalls.ipynb#appendix-c-the-bus-error-of-older-torch)).

    With ``signal.SIGBUS`` the DataLoader reports what a too small ``/dev/shm`` gave with torch
    releases that only sized shared-memory files (the worker got SIGBUS writing into the full file);
    since pytorch PR #161910 (``posix_fallocate``) the worker raises "unable to allocate shared
    memory(shm) ... No space left on device" instead (torch 2.13 to 2.15, measured in
    [08 · A full `/dev/shm`](../notebooks/08_debugging_and_pitfalls.ipynb#a-full-dev-shm)).
    Only in a worker: in the main process it refuses.

    >>> SignalsInWorker(15)[0]
    Traceback (most recent call last):
    ...
    RuntimeError: SignalsInWorker only signals a DataLoader worker, not the main process
    """

    def __init__(self, signum: int, n: int = 4):
        self.signum, self.n = signum, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if get_worker_info() is None:
            raise RuntimeError("SignalsInWorker only signals a DataLoader worker, not the main process")
        os.kill(os.getpid(), self.signum)
        return i


class Records(Dataset):
    """``n`` records of data, held either as ``n`` Python float objects (a list) or as one NumPy array.

    Item ``i`` sums block ``i`` of ``block`` records: it *reads* them, nothing more. Reading a Python
    object still writes to it (its reference count), so a forked worker copies every page it reads
    (copy-on-read); an array's values are read without touching the pages' contents.

    Used in [07 · Appendix: worker memory](../notebooks/07_dataloader_workers.ipynb#appendix-worker-memory-tensors-arrays-and-python-objects).

    >>> Records(10, as_array=True, block=5)[1]
    35.0
    """

    def __init__(self, n: int, as_array: bool, block: int = 20_000):
        values = np.arange(n, dtype=np.float64)
        self.data = values if as_array else values.tolist()
        self.n, self.block = n, block

    def __len__(self) -> int:
        return -(-self.n // self.block)

    def __getitem__(self, i: int) -> float:
        return float(sum(self.data[i * self.block : (i + 1) * self.block]))


def worker_memory(dataset: Dataset, method: str = FAST_METHOD) -> dict[str, float]:
    """Memory (MB) of one DataLoader worker after it has read ``dataset`` once, with psutil.

    ``uss`` is memory only that worker owns (its private copies), ``pss`` adds a fair share of the
    pages it shares (Linux only: psutil has no PSS elsewhere, and the key is then missing), ``rss``
    counts every page it maps. The worker is persistent so it can be measured after the epoch; it is
    shut down before this returns. Used in
    [07 · Appendix: worker memory](../notebooks/07_dataloader_workers.ipynb#appendix-worker-memory-tensors-arrays-and-python-objects).

    >>> {"uss", "rss"} <= set(worker_memory(Records(1000, as_array=True)))
    True
    """
    before = {child.pid for child in live_children()}
    loader = DataLoader(
        dataset, batch_size=None, num_workers=1, persistent_workers=True, multiprocessing_context=method
    )
    iterator = iter(loader)
    for _ in iterator:
        pass
    try:
        (worker,) = [c for c in live_children() if c.pid not in before]
        info = worker.memory_full_info()
        return {name: getattr(info, name) / 2**20 for name in ("uss", "pss", "rss") if hasattr(info, name)}
    finally:
        del iterator, loader  # shuts the persistent worker down
