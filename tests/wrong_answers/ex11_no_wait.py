"""Wrong: an asynchronous all-reduce that nobody waits for: the division races with the reduction."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.utils.data import TensorDataset

# Given: the checker trains with these. Do not change them.
STEPS, BATCH_SIZE, LR, SEED = 8, 16, 0.1, 0


def make_data() -> TensorDataset:
    """256 samples of a linear regression task, the same in every process."""
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(SEED))
    return TensorDataset(x, x @ torch.linspace(-1.0, 1.0, 8).unsqueeze(1))


def make_model() -> torch.nn.Module:
    """The model every rank starts from (the same weights on every rank: no broadcast needed)."""
    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


def average_in_backward(model: torch.nn.Module) -> None:
    """Register, on every parameter of ``model``, a hook that all-reduces its gradient and divides it
    by the world size, as soon as the gradient is complete in ``backward()``."""

    def average(param: torch.nn.Parameter) -> None:
        dist.all_reduce(param.grad, async_op=True)  # returns a Work at once: never waited for
        param.grad /= dist.get_world_size()

    for param in model.parameters():
        param.register_post_accumulate_grad_hook(average)
