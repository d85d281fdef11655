"""Wrong: forgets share_memory_(); a fork child writes to its own copy (spawn happens to work)."""

import torch


def make_counter(n: int) -> torch.Tensor:
    return torch.zeros(n)


def add_rank(rank: int, counter: torch.Tensor) -> None:
    counter += rank + 1
