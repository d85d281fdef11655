"""Collectives on gloo, and DistributedDataParallel built from them: the rank-side code of notebook 11.

Every function here runs inside a rank of an initialised process group (gloo on the CPU). The two
pieces of data parallelism by hand are :func:`broadcast_parameters` (every rank starts from rank 0's
weights) and :func:`average_gradients` (after ``backward()``, every rank holds the mean of all
ranks' gradients); with them, ``optimizer.step()`` takes the same step on every rank, which is what
``DistributedDataParallel`` does. Notebook 12 uses them as the baseline of its ZeRO/FSDP benchmark.

Example (a world of one rank, in this process)::

    >>> import torch, torch.distributed as dist
    >>> from helpers.collectives import broadcast_parameters, average_gradients
    >>> from helpers.ddp import free_port
    >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    >>> model = torch.nn.Linear(3, 1)
    >>> broadcast_parameters(model)
    >>> model(torch.ones(2, 3)).sum().backward()
    >>> average_gradients(model)  # the mean over one rank: the gradient itself
    >>> model.bias.grad
    tensor([2.])
    >>> dist.destroy_process_group()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from torch import nn

__all__ = ["broadcast_parameters", "average_gradients"]


def broadcast_parameters(model: nn.Module, src: int = 0) -> None:
    """Copy rank ``src``'s parameters and buffers into every rank's ``model``, in place.

    What ``DistributedDataParallel`` does when it is constructed; every rank of the group must call
    it, with models of the same shapes (notebook 11, "DDP by hand").

    >>> broadcast_parameters(torch.nn.Linear(2, 2))  # doctest: +SKIP
    """
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            dist.broadcast(tensor, src)


def average_gradients(model: nn.Module) -> None:
    """Replace every ``.grad`` of ``model`` by its mean over the ranks: all-reduce SUM, then divide by
    the world size. Call it between ``backward()`` and ``optimizer.step()`` on every rank.

    One all-reduce per parameter, after the whole backward pass: the simplest correct DDP (notebook
    11, "DDP by hand"); DDP itself all-reduces buckets of gradients while backward still runs.

    >>> average_gradients(torch.nn.Linear(2, 2))  # doctest: +SKIP
    """
    world_size = dist.get_world_size()
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad /= world_size
