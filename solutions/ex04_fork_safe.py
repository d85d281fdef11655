"""Reference solution to exercise 04: a fork-safe worker; a parent that keeps CUDA out (04's pattern)."""

from __future__ import annotations

import torch
import torch.multiprocessing as mp


def fork_safe_sum(size: int) -> float:
    """Return ``float(torch.randn(size, dtype=torch.float64).float().sum())``, safely in a fork child."""
    torch.set_num_threads(1)  # before the first op: never enter the parent's (broken) OpenMP pool
    return float(torch.randn(size, dtype=torch.float64).float().sum())


def worker(rank: int, results) -> None:
    """Pick this process's device (asked here, in the child), compute, put ``(rank, device, value)``."""
    torch.set_num_threads(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    results.put((rank, str(device), torch.ones(1000, device=device).sum().item()))


def run_workers(n_workers: int = 2) -> list[tuple[int, str, float]]:
    """Start ``n_workers`` workers that pick their own device; return their ``(rank, device, value)``."""
    ctx = mp.get_context("spawn")  # a fresh interpreter: CUDA works in it; no torch.cuda call here
    results = ctx.Queue()
    workers = [ctx.Process(target=worker, args=(rank, results)) for rank in range(n_workers)]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=120) for _ in workers]  # get before join
    for w in workers:
        w.join(timeout=30)
    return sorted(outcomes)
