"""DDP by hand, 2 gloo ranks: broadcast, all-reduce gradients / world size, step. python 11_ddp_by_hand.py"""

import socket
from datetime import timedelta

import torch
import torch.distributed as dist  # no `import torch.distributed.nn` first: nothing here imports it


def train(rank, world_size, port):
    torch.set_num_threads(1)  # the ranks share the cores
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))  # fmt: skip
    try:
        torch.manual_seed(rank)  # different weights on every rank, on purpose
        model = torch.nn.Linear(4, 1, bias=False)
        for p in model.parameters():
            dist.broadcast(p.data, src=0)  # now every rank holds rank 0's weights
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        x = torch.eye(4).repeat(16, 1)[rank::world_size]  # this rank's half of the data
        for _ in range(40):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True)).backward()  # y = x.sum(1)
            for p in model.parameters():
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)  # every rank must call it, in the same order
                p.grad /= world_size  # the sum of the ranks' gradients -> their mean
            optimizer.step()
        print(f"rank {rank}: weights {model.weight.flatten().tolist()} (target: all 1)\n", end="")
    finally:
        dist.destroy_process_group()  # whatever happened above


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", 0)) as s:  # the OS picks a free port
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(train, args=(2, port), nprocs=2)  # the rank comes first; raises if one fails
