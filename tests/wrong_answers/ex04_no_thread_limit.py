"""Wrong: runs the op with the inherited thread count: hangs in a fork child of a busy parent."""

import torch
from helpers.solutions.ex04_fork_safe import run_workers  # noqa: F401 (part 2 is right)


def fork_safe_sum(size: int) -> float:
    return float(torch.randn(size, dtype=torch.float64).float().sum())
