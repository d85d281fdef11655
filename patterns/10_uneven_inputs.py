"""DDP with uneven inputs (rank r has 3 + r batches) inside Join. Run: python 10_uneven_inputs.py [method]"""

import socket
import sys
from datetime import timedelta

import torch.distributed.nn  # first, or ~1 run in 30 aborts at exit: see upstream/dist_nn_abort_at_exit.py
from torch.distributed.algorithms.join import Join


def train(rank, world_size, url, timeout=timedelta(seconds=60)):  # a demo: seconds; a real job: minutes
    torch.set_num_threads(1)  # the ranks share the cores
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
        print(f"rank {rank}: {3 + rank} batches; mean loss, all ranks {summed[0] / summed[1]:.4f}\n", end="")
    finally:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", 0)) as s:  # a free port per job, never a fixed one
        url = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"  # mp.spawn is start_processes with spawn
    torch.multiprocessing.start_processes(train, (2, url), nprocs=2, start_method=method)
