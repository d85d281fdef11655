"""FSDP2 on CPU: 2 ranks (gloo) train one model, each holding half of it. Run: python 12_fsdp2_cpu.py"""

import socket
from datetime import timedelta

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard  # torch 2.6+; imports torch.distributed.nn, before any group


def train(rank, world_size, port, timeout=timedelta(seconds=60)):  # a demo: seconds; a real job: minutes
    torch.set_num_threads(1)  # the ranks share the cores
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                         world_size=world_size, timeout=timeout)  # fmt: skip
    try:
        mesh = init_device_mesh("cpu", (world_size,))  # the ranks that share the model out
        torch.manual_seed(0)  # the same initial model on every rank (FSDP2 does not broadcast it)
        model = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        for layer in (model[0], model[2], model):  # the layers first, then the root: this rank keeps
            fully_shard(layer, mesh=mesh)  # 1/world_size of each parameter (rows), frees the rest
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)  # state for this rank's shards only
        x = torch.randn(256, 4, generator=torch.Generator().manual_seed(rank))  # this rank's data
        for _ in range(100):  # learn y = x (untrained, the loss is about 1.2): backward() all-gathers
            optimizer.zero_grad()  # each layer's weights again and reduce-scatters the gradients
            (loss := torch.nn.functional.mse_loss(model(x), x)).backward()
            optimizer.step()
        held = sum(p.to_local().numel() for p in model.parameters())
        print(f"rank {rank}: loss {loss.item():.4f}, holds {held} of 580 values\n", end="")  # one write
    finally:
        torch.distributed.destroy_process_group()  # whatever happened above


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", 0)) as s:  # the OS picks a free port; closed before spawn
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(train, args=(2, port), nprocs=2)  # the rank comes first; raises if one fails
