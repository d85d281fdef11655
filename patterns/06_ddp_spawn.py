"""Minimal DDP: mp.spawn starts 2 ranks (gloo on CPU) that train one model. Run: python 06_ddp_spawn.py"""

import socket
from datetime import timedelta

import torch.distributed.nn  # first, or ~1 run in 30 aborts at exit: see upstream/dist_nn_abort_at_exit.py


def train(rank, world_size, port, timeout=timedelta(seconds=60)):  # a demo: seconds; a real job: minutes
    torch.set_num_threads(1)  # the ranks share the cores
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                         world_size=world_size, timeout=timeout)  # fmt: skip
    try:
        data = torch.utils.data.TensorDataset(torch.eye(4).repeat(128, 1), torch.ones(512, 1))  # y = x.sum()
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1, bias=False))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        sampler = torch.utils.data.distributed.DistributedSampler(data, world_size, rank, seed=0)
        for epoch in range(5):
            sampler.set_epoch(epoch)  # a new shuffle every epoch, the same on every rank
            for x, y in torch.utils.data.DataLoader(data, batch_size=32, sampler=sampler):
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()  # DDP averages the gradients
                optimizer.step()
        print(f"rank {rank}: weights {model.module.weight.tolist()} (target: all 1)")  # rank 0 would save
    finally:
        torch.distributed.destroy_process_group()  # whatever happened above


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", 0)) as s:  # the OS picks a free port; closed before spawn
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(train, args=(2, port), nprocs=2)  # the rank comes first; raises if one fails
