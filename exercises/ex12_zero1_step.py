"""Exercise 12 (ZeRO-1): keep Adam's state for one slice of the model on each rank, by hand.

The task: write the two functions that turn data-parallel training with Adam into ZeRO-1, so that
each rank's optimizer holds the state of ``1/world_size`` of the parameters and the model still
ends with exactly the weights DDP with Adam would give it.

1. ``shard_of(model, rank, world_size)`` returns this rank's slice of all of ``model``'s
   parameters: flattened in ``model.parameters()`` order into one vector, padded with zeros at the
   end to a multiple of ``world_size``, cut into ``world_size`` equal slices; slice ``rank``, as a
   new ``torch.nn.Parameter`` (a copy, not a view of the model's weights).
2. ``zero1_step(model, shard, optimizer)`` runs after ``backward()`` on every rank: it gives
   ``shard`` the average over the ranks of its slice of the gradients (``reduce_scatter_tensor``
   of the flattened, padded gradients, then divide by the world size), calls
   ``optimizer.step()`` (the optimizer steps ``shard`` only), then collects every rank's stepped
   slice (``all_gather_into_tensor``) and copies the values into the model's parameters.

``train`` and ``launch`` are given: each rank builds ``Adam([shard_of(...)])`` and calls your
``zero1_step`` after every ``backward()``; rank 0 saves the weights and how many values Adam's
state holds.

What the checker compares: ``shard_of(make_model(), 2, 3)`` (in a child process); then it calls
``launch(2, path)`` in a child process (with a deadline) and compares rank 0's weights with one
process that trains ``make_model()`` with Adam (``lr=LR``) on batches of ``2 * BATCH_SIZE`` in
order, which is what DDP with Adam computes (notebook 12, "ZeRO-1 by hand"). They must agree to
1e-5, and Adam's state on rank 0 must hold two values per value of its slice. Check with::

    from helpers.checkers import check_ex12; check_ex12()
"""

from __future__ import annotations

import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (given; before any group: notebook 06, "a rank that aborts at exit")
import torch.multiprocessing as mp
from torch.utils.data import TensorDataset

# Given: the checker trains its single-process reference with these. Do not change them.
STEPS, BATCH_SIZE, LR, SEED = 8, 16, 0.01, 0


def make_data() -> TensorDataset:
    """256 samples of a regression task, the same in every process."""
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(SEED))
    return TensorDataset(x, torch.sin(x @ torch.linspace(-1.0, 1.0, 8).unsqueeze(1)))


def make_model() -> torch.nn.Module:
    """The model every rank starts from: 161 parameters (which 2 and 3 ranks do not divide)."""
    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def shard_of(model: torch.nn.Module, rank: int, world_size: int) -> torch.nn.Parameter:
    """This rank's slice of all of ``model``'s parameters, flattened and padded (a copy)."""
    raise NotImplementedError("exercise 12: write shard_of")


def zero1_step(model: torch.nn.Module, shard: torch.nn.Parameter, optimizer: torch.optim.Optimizer) -> None:
    """After ``backward()``: reduce-scatter the gradients, step ``shard``, all-gather into ``model``."""
    raise NotImplementedError("exercise 12: write zero1_step")


# Given from here on.
def train(rank: int, world_size: int, port: int, path: str) -> None:
    """One rank: ZeRO-1 with Adam for ``STEPS`` steps; rank 0 saves the weights and Adam's size."""
    torch.set_num_threads(1)  # the ranks share the cores
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
        timeout=timedelta(seconds=60),
    )  # fmt: skip
    try:
        (x, y), model = make_data().tensors, make_model()
        shard = shard_of(model, rank, world_size)
        optimizer = torch.optim.Adam([shard], lr=LR)  # Adam's state: for this rank's slice only
        for step in range(STEPS):
            batch = slice(
                (step * world_size + rank) * BATCH_SIZE, (step * world_size + rank + 1) * BATCH_SIZE
            )
            model.zero_grad()  # rank r reads the r-th of every world_size batches
            torch.nn.functional.mse_loss(model(x[batch]), y[batch]).backward()
            zero1_step(model, shard, optimizer)
        if rank == 0:
            values = sum(t.numel() for s in optimizer.state.values() for t in s.values() if t.dim() > 0)
            torch.save({"model": model.state_dict(), "optimizer_values": values}, path)
    finally:
        dist.destroy_process_group()


def launch(world_size: int, path: str) -> None:
    """Start ``world_size`` ranks of :func:`train` with ``mp.spawn``, on a free port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(train, args=(world_size, port, path), nprocs=world_size)
