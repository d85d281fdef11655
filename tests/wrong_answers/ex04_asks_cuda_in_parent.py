"""Wrong: the parent asks torch.cuda.is_available() and hands the device to its workers."""

import torch
import torch.multiprocessing as mp
from helpers.solutions.ex04_fork_safe import fork_safe_sum  # noqa: F401 (part 1 is right)


def worker(rank: int, device: str, results) -> None:
    torch.set_num_threads(1)
    results.put((rank, device, torch.ones(1000, device=device).sum().item()))


def run_workers(n_workers: int = 2) -> list[tuple[int, str, float]]:
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the mistake: a CUDA query in the parent
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    workers = [ctx.Process(target=worker, args=(rank, device, results)) for rank in range(n_workers)]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=30)
    return sorted(outcomes)
