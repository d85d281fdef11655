"""Wrong: runs the op with the inherited thread count: hangs in a fork child of a busy parent."""

import torch


def fork_safe_sum(size: int) -> float:
    return float(torch.randn(size, dtype=torch.float64).float().sum())
