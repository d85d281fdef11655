"""Reference solution to exercise 04."""

from __future__ import annotations

import torch


def fork_safe_sum(size: int) -> float:
    """Return ``float(torch.randn(size, dtype=torch.float64).float().sum())``, safely in a fork child."""
    torch.set_num_threads(1)  # before the first op: never enter the parent's (broken) OpenMP pool
    return float(torch.randn(size, dtype=torch.float64).float().sum())
