"""Wrong: the race is still there (``+=`` on a shared element is a read and a write), only its
window is too narrow to show often: the check cannot tell this from a fix."""

import torch
import torch.multiprocessing as mp


def safe_add(rank: int, total: torch.Tensor, n: int) -> None:
    torch.set_num_threads(1)
    for _ in range(n):
        total[0] += 1


def safe_count(nprocs: int, n: int, method: str = "spawn") -> int:
    ctx = mp.get_context(method)
    total = torch.zeros(1, dtype=torch.int64).share_memory_()
    workers = [ctx.Process(target=safe_add, args=(rank, total, n)) for rank in range(nprocs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    return int(total.sum())
