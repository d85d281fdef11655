"""Wrong: starts workers that may use CUDA as fork children."""

import torch.multiprocessing as mp
from helpers.solutions.ex04_fork_safe import fork_safe_sum, worker  # noqa: F401 (the worker is right)


def run_workers(n_workers: int = 2) -> list[tuple[int, str, float]]:
    ctx = mp.get_context("fork")  # the mistake: a fork child cannot use CUDA once the parent has
    results = ctx.Queue()
    workers = [ctx.Process(target=worker, args=(rank, results)) for rank in range(n_workers)]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=30)
    return sorted(outcomes)
