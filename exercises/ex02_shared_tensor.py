"""Exercise 02 (shared tensors): fix the lost updates.

``racy_count(nprocs, n, method)`` below is the race of
[02 · Races](../notebooks/02_shared_tensors.ipynb#races-lost-updates-and-two-fixes), written out. It puts
a one-element counter in shared memory, starts ``nprocs`` processes that each add 1 to it ``n``
times (read, yield the CPU, write) and returns the total. Run it: the total comes out short of
``nprocs * n``, because two processes read the same value and both write ``value + 1``.

Write ``safe_count(nprocs, n, method)`` and its worker ``safe_add``: the same processes, the same
read / yield / write in the worker (it stands for any read-modify-write; keep the
``time.sleep(0)``, it makes the race show every run), and a total that is exact every time.
Either fix of [02 · Races](../notebooks/02_shared_tensors.ipynb#races-lost-updates-and-two-fixes) works:

- one ``ctx.Lock()``, created in the parent and passed to every worker, held around the read *and*
  the write;
- one slot per rank: ``torch.zeros(nprocs, ...)`` in shared memory, rank r writes only slot r,
  and the parent sums the slots after the joins.

Change ``safe_add``'s arguments as your fix needs. Keep the bounded joins.

The checker runs ``safe_count(4, 1000, method)`` in real processes under fork and under spawn and
expects exactly 4000. Check with::

    from helpers.checkers import check_ex02; check_ex02()
"""

from __future__ import annotations

import time

import torch
import torch.multiprocessing as mp


def racy_add(rank: int, total: torch.Tensor, n: int) -> None:
    """Add 1 to ``total[0]`` ``n`` times: read, yield, write. Loses updates in parallel."""
    torch.set_num_threads(1)
    for _ in range(n):
        value = int(total[0])
        time.sleep(0)  # another process runs here, reads the same value, and one update is lost
        total[0] = value + 1


def racy_count(nprocs: int, n: int, method: str = "spawn") -> int:
    """Run ``racy_add`` in ``nprocs`` processes on one shared counter; return the total counted."""
    ctx = mp.get_context(method)
    total = torch.zeros(1, dtype=torch.int64).share_memory_()
    workers = [ctx.Process(target=racy_add, args=(rank, total, n)) for rank in range(nprocs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    if [w.exitcode for w in workers] != [0] * nprocs:
        raise RuntimeError(f"workers failed or hung: exit codes {[w.exitcode for w in workers]}")
    return int(total.sum())


def safe_add(rank: int, total: torch.Tensor, n: int) -> None:
    """``racy_add`` with your fix: the same read / yield / write, and no update lost."""
    raise NotImplementedError("exercise 02: write safe_add")


def safe_count(nprocs: int, n: int, method: str = "spawn") -> int:
    """``racy_count`` with your fix: start ``nprocs`` processes of ``safe_add``; return the exact total."""
    raise NotImplementedError("exercise 02: write safe_count")
