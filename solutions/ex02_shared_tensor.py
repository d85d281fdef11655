"""Reference solution to exercise 02: one lock, created in the parent, around the read and the write.

The other fix works as well: ``counts = torch.zeros(nprocs, dtype=torch.int64).share_memory_()``,
rank r does its read / yield / write on ``counts[rank]`` only (no lock needed: nobody else writes
there), and the parent returns ``int(counts.sum())`` after the joins.
"""

from __future__ import annotations

import time

import torch
import torch.multiprocessing as mp


def safe_add(rank: int, total: torch.Tensor, n: int, lock) -> None:
    """Add 1 to ``total[0]`` ``n`` times, each read / yield / write inside ``lock``."""
    torch.set_num_threads(1)
    for _ in range(n):
        with lock:  # no other process can read between our read and our write
            value = int(total[0])
            time.sleep(0)
            total[0] = value + 1


def safe_count(nprocs: int, n: int, method: str = "spawn") -> int:
    """Run ``safe_add`` in ``nprocs`` processes with one shared lock; return the exact total."""
    ctx = mp.get_context(method)
    total = torch.zeros(1, dtype=torch.int64).share_memory_()
    lock = ctx.Lock()  # one lock for all: created here, passed to every worker
    workers = [ctx.Process(target=safe_add, args=(rank, total, n, lock)) for rank in range(nprocs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    if [w.exitcode for w in workers] != [0] * nprocs:
        raise RuntimeError(f"workers failed or hung: exit codes {[w.exitcode for w in workers]}")
    return int(total.sum())
