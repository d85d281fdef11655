"""Wrong: the worker rebinds its local name to a new tensor; the shared one is untouched."""

import torch


def make_counter(n: int) -> torch.Tensor:
    return torch.zeros(n).share_memory_()


def add_rank(rank: int, counter: torch.Tensor) -> None:
    counter = counter + (rank + 1)  # noqa: F841 (the mistake: a new tensor, local to this function)
