"""Wrong: one slot per rank, but the slots are not in shared memory: fork children write to their own
copy-on-write copies (spawn happens to work: pickling the tensor for the child shares it)."""

import time

import torch
import torch.multiprocessing as mp


def safe_add(rank: int, counts: torch.Tensor, n: int) -> None:
    torch.set_num_threads(1)
    for _ in range(n):
        value = int(counts[rank])
        time.sleep(0)
        counts[rank] = value + 1


def safe_count(nprocs: int, n: int, method: str = "spawn") -> int:
    ctx = mp.get_context(method)
    counts = torch.zeros(nprocs, dtype=torch.int64)  # the mistake: no share_memory_()
    workers = [ctx.Process(target=safe_add, args=(rank, counts, n)) for rank in range(nprocs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    return int(counts.sum())
