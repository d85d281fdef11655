"""Minimal DDP: mp.spawn starts 2 ranks (gloo on CPU) that train one model. Run: python 06_ddp_spawn.py"""

import socket
from datetime import timedelta

import torch.distributed.nn  # binds torch; first, or DDP imports it later and it holds the group (nb 06)


def train(rank, world_size, url, timeout=timedelta(seconds=60)):  # mp.spawn passes the rank first
    torch.distributed.init_process_group("gloo", url, rank=rank, world_size=world_size, timeout=timeout)
    try:
        data = torch.utils.data.TensorDataset(torch.eye(4).repeat(128, 1), torch.ones(512, 1))  # y = x.sum()
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1, bias=False))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        sampler = torch.utils.data.DistributedSampler(data, world_size, rank, seed=0)  # this rank's share
        for epoch in range(5):
            sampler.set_epoch(epoch)  # a new shuffle every epoch, the same on every rank
            for x, y in torch.utils.data.DataLoader(data, batch_size=32, sampler=sampler):
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()  # DDP averages the gradients
                optimizer.step()
        if rank == 0:  # one rank reports (and would save: torch.save(model.module.state_dict(), path))
            print(f"rank 0 of {world_size}: weights {model.module.weight.tolist()} (target: all 1)")
    finally:
        torch.distributed.destroy_process_group()  # whatever happened above


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", 0)) as s:  # the OS picks a free port; closed before spawn
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(train, args=(2, f"tcp://127.0.0.1:{port}"), nprocs=2)  # raises if one fails
    print("mp.spawn returned: both ranks trained and left the group")
