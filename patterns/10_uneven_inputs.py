"""DDP with uneven inputs (rank r has 3 + r batches) inside Join. Run: python 10_uneven_inputs.py [method]"""

import socket
import sys
from datetime import timedelta

import torch.distributed.nn  # binds torch; first, or DDP imports it later and it holds the group (nb 06)
from torch.distributed.algorithms.join import Join


def train(rank, world_size, url, timeout=timedelta(seconds=60)):  # seconds here; minutes for a real job
    torch.distributed.init_process_group("gloo", url, rank=rank, world_size=world_size, timeout=timeout)
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
        optimizer, summed = torch.optim.SGD(model.parameters(), lr=0.1), torch.zeros(2)  # loss, batches
        with Join([model]):  # a rank out of data answers DDP's all-reduces (only DDP's) with zeros
            for _ in range(3 + rank):  # uneven: 3 batches on rank 0, 4 on rank 1
                optimizer.zero_grad()
                loss = model(torch.randn(8, 4)).pow(2).mean()
                loss.backward()
                optimizer.step()
                summed += torch.tensor([loss.item(), 1.0])  # a metric: summed here, all-reduced below
        torch.distributed.all_reduce(summed)  # after Join, every rank calls it (inside, it would fail)
        print(f"rank {rank}: {3 + rank} batches; mean loss of all ranks {summed[0] / summed[1]:.4f}")
    finally:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", 0)) as s:  # a free port per job, never a fixed one
        url = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    torch.multiprocessing.start_processes(train, (2, url), nprocs=2, start_method=(sys.argv + ["spawn"])[1])
