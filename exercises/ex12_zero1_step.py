"""Exercise 12 (ZeRO-1): keep Adam's state for one slice of the model on each rank, by hand.

The task: write the two functions that turn data-parallel training with Adam into ZeRO-1, so that
each rank's optimizer holds the state of ``1/world_size`` of the parameters and the model still
ends with exactly the weights DDP with Adam would give it.

1. ``shard_of(model, rank, world_size)`` returns ``(flat, flat_grad, shard)``. ``flat`` holds all
   of ``model``'s parameters, flattened in ``model.parameters()`` order and padded with zeros at the
   end to a multiple of ``world_size``; afterwards every parameter is a view of it (its ``.data``),
   and every parameter's ``.grad`` a view of ``flat_grad``, a zero buffer of the same size.
   ``shard`` is slice ``rank`` of the ``world_size`` equal slices of ``flat``, as a
   ``torch.nn.Parameter`` that shares ``flat``'s memory (no copy), with the same slice of
   ``flat_grad`` as its ``.grad``.
2. ``zero1_step(flat, flat_grad, shard, optimizer)`` runs after ``backward()`` on every rank: it
   gives ``shard.grad`` the average over the ranks of its slice of the gradients
   (``reduce_scatter_tensor`` from ``flat_grad``, then divide by the world size), calls
   ``optimizer.step()`` (which steps ``shard``, so writes into ``flat``), then collects every
   rank's stepped slice into ``flat`` (``all_gather_into_tensor``): the model is up to date.

``train`` and ``launch`` are given: each rank builds ``Adam([shard])``, zeroes the gradients in
place (``zero_grad(set_to_none=False)`` keeps the views) and calls your ``zero1_step`` after every
``backward()``; rank 0 saves the weights, Adam's state and the bytes the rank holds.

What the checker compares: ``shard_of(make_model(), 2, 3)`` (in a child process); then it calls
``launch(2, path)`` in a child process (with a deadline) and compares rank 0 with one process that
trains ``make_model()`` with Adam (``lr=LR``) on batches of ``2 * BATCH_SIZE`` in order, which is
what DDP with Adam computes (notebook 12, "ZeRO-1 by hand"): the weights and Adam's first moment
for rank 0's slice must agree to 1e-5; Adam's state must hold two values per value of the slice;
and the rank must hold no copy: ``flat``, ``flat_grad`` and Adam's state, 4 + 4 + 8/W bytes per
parameter. Check with::

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


def shard_of(model: torch.nn.Module, rank: int, world_size: int) -> tuple:
    """``(flat, flat_grad, shard)``: the model's parameters and gradients as views of two flat, padded
    buffers, and this rank's slice of ``flat`` as a parameter (a view: no copy)."""
    raise NotImplementedError("exercise 12: write shard_of")


def zero1_step(flat: torch.Tensor, flat_grad: torch.Tensor, shard: torch.nn.Parameter, optimizer) -> None:
    """After ``backward()``: reduce-scatter into ``shard.grad``, step ``shard``, all-gather into ``flat``."""
    raise NotImplementedError("exercise 12: write zero1_step")


# Given from here on.
def train(rank: int, world_size: int, port: int, path: str) -> None:
    """One rank: ZeRO-1 with Adam for ``STEPS`` steps; rank 0 saves the weights, Adam's size and first
    moment, and the bytes the rank holds."""
    torch.set_num_threads(1)  # the ranks share the cores
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
        timeout=timedelta(seconds=60),
    )  # fmt: skip
    try:
        (x, y), model = make_data().tensors, make_model()
        flat, flat_grad, shard = shard_of(model, rank, world_size)
        optimizer = torch.optim.Adam([shard], lr=LR)  # Adam's state: for this rank's slice only
        for step in range(STEPS):
            batch = slice(
                (step * world_size + rank) * BATCH_SIZE, (step * world_size + rank + 1) * BATCH_SIZE
            )
            model.zero_grad(set_to_none=False)  # in place: the gradients stay views of flat_grad
            torch.nn.functional.mse_loss(model(x[batch]), y[batch]).backward()  # rank r: r-th batches
            zero1_step(flat, flat_grad, shard, optimizer)
        if rank == 0:
            state = optimizer.state[shard]
            values = sum(t.numel() for t in state.values() if t.dim() > 0)
            held = _held_bytes([*model.parameters(), shard], list(state.values()))
            saved = {"model": model.state_dict(), "optimizer_values": values, "held": held}
            torch.save({**saved, "exp_avg": state["exp_avg"].clone()}, path)
    finally:
        dist.destroy_process_group()


def _held_bytes(params: list, state: list) -> int:
    """Bytes of the parameters, their gradients and the optimizer state, each block of memory once."""
    tensors = [*params, *(p.grad for p in params if p.grad is not None), *state]
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


def launch(world_size: int, path: str) -> None:
    """Start ``world_size`` ranks of :func:`train` with ``mp.spawn``, on a free port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(train, args=(world_size, port, path), nprocs=world_size)
