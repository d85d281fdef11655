"""Wrong: shard_of gives every rank the whole model (padded) instead of its slice."""

from __future__ import annotations

import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (given; before any group: notebook 06, "a rank that aborts at exit")
import torch.multiprocessing as mp
from torch.utils.data import TensorDataset

from helpers.launch import FAST_METHOD

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
    params = list(model.parameters())
    size = -(-sum(p.numel() for p in params) // world_size)  # ceil
    flat, flat_grad = torch.zeros(size * world_size), torch.zeros(size * world_size)
    offset = 0
    for p in params:  # each parameter and its gradient become a view of the flat buffers
        piece = slice(offset, offset + p.numel())
        flat[piece] = p.detach().reshape(-1)
        p.data, p.grad = flat[piece].view_as(p), flat_grad[piece].view_as(p)
        offset += p.numel()
    shard = torch.nn.Parameter(flat)  # the whole model
    shard.grad = flat_grad
    return flat, flat_grad, shard


def zero1_step(flat: torch.Tensor, flat_grad: torch.Tensor, shard: torch.nn.Parameter, optimizer) -> None:
    """After ``backward()``: reduce-scatter into ``shard.grad``, step ``shard``, all-gather into ``flat``."""
    dist.reduce_scatter_tensor(shard.grad, flat_grad)  # my slice, summed over the ranks
    shard.grad /= dist.get_world_size()  # the average, as DDP's
    optimizer.step()  # in place: writes into flat, the model's memory
    dist.all_gather_into_tensor(flat, shard.detach())  # every rank's stepped slice


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
    """Start ``world_size`` ranks of :func:`train` on a free port, started with ``FAST_METHOD`` (fork on
    Linux) where a learner's ``mp.spawn`` spawns: the mistake is the same, and two spawned interpreters
    cost about 5 CPU-seconds a check."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(train, args=(world_size, port, path), nprocs=world_size, start_method=FAST_METHOD)
