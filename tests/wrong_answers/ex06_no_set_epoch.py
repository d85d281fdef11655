"""Wrong: never calls set_epoch, so every epoch reads the first epoch's order."""

from __future__ import annotations

import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (given; before any group: notebook 06, "a rank that aborts at exit")
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from helpers.launch import FAST_METHOD

EPOCHS, BATCH_SIZE, LR, SEED = 3, 16, 0.1, 0


def make_data() -> TensorDataset:
    """256 samples of a linear regression task, the same in every process."""
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(SEED))
    return TensorDataset(x, x @ torch.linspace(-1.0, 1.0, 8).unsqueeze(1))


def make_model() -> torch.nn.Module:
    """The model every rank starts from."""
    torch.manual_seed(SEED)
    return torch.nn.Linear(8, 1)


def train(rank: int, world_size: int, port: int, path: str) -> None:
    """One DDP rank; rank 0 saves the trained ``state_dict`` to ``path``."""
    torch.set_num_threads(1)  # the ranks share the cores
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=60),
    )
    try:
        data = make_data()
        model = DDP(make_model())
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        sampler = DistributedSampler(data, world_size, rank, seed=SEED)
        loader = DataLoader(data, batch_size=BATCH_SIZE, sampler=sampler)
        for _epoch in range(EPOCHS):  # the mistake: no sampler.set_epoch(epoch)
            for x, y in loader:
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()  # DDP averages the gradients
                optimizer.step()
        if rank == 0:
            torch.save(model.module.state_dict(), path)
    finally:
        dist.destroy_process_group()


def launch(world_size: int, path: str) -> None:
    """Start ``world_size`` ranks of :func:`train` on a free port, started with ``FAST_METHOD`` (fork on
    Linux) where a learner's ``mp.spawn`` spawns: the mistake is the same, and two spawned interpreters
    cost about 5 CPU-seconds a check."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(train, args=(world_size, port, path), nprocs=world_size, start_method=FAST_METHOD)
