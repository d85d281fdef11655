"""Wrong: each worker creates its own Lock, so no two processes ever wait for the same one."""

import multiprocessing
import time

import torch
import torch.multiprocessing as mp


def safe_add(rank: int, total: torch.Tensor, n: int) -> None:
    torch.set_num_threads(1)
    lock = multiprocessing.Lock()  # the mistake: a new lock in every process
    for _ in range(n):
        with lock:
            value = int(total[0])
            time.sleep(0)
            total[0] = value + 1


def safe_count(nprocs: int, n: int, method: str = "spawn") -> int:
    ctx = mp.get_context(method)
    total = torch.zeros(1, dtype=torch.int64).share_memory_()
    workers = [ctx.Process(target=safe_add, args=(rank, total, n)) for rank in range(nprocs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    return int(total.sum())
