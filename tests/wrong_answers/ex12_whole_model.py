"""Wrong: every rank keeps the whole model in its "shard" and all-reduces: Adam's state is not sharded."""

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
    return torch.nn.Parameter(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))


def zero1_step(model: torch.nn.Module, shard: torch.nn.Parameter, optimizer: torch.optim.Optimizer) -> None:
    """After ``backward()``: reduce-scatter the gradients, step ``shard``, all-gather into ``model``."""
    params = list(model.parameters())
    shard.grad = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(shard.grad)
    shard.grad /= dist.get_world_size()
    optimizer.step()
    with torch.no_grad():
        for p, piece in zip(params, shard.detach().split([p.numel() for p in params]), strict=True):
            p.copy_(piece.view_as(p))


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
