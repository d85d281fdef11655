"""DDP, uneven inputs: rank r has 3 + r batches; Join keeps them in step. Run: python 10_uneven_inputs.py"""

import socket
import sys
from datetime import timedelta

import torch.distributed.nn  # binds torch; first, or DDP imports it later and it holds the group (nb 06)
from torch.distributed.algorithms.join import Join


def train(rank, world_size, url, timeout=timedelta(seconds=60)):  # mp.spawn passes the rank first
    torch.distributed.init_process_group("gloo", url, rank=rank, world_size=world_size, timeout=timeout)
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with Join([model]):  # a rank out of data shadows the all-reduces of the others
            for _ in range(3 + rank):  # uneven: 3 batches on rank 0, 4 on rank 1
                optimizer.zero_grad()
                model(torch.randn(8, 4)).pow(2).mean().backward()
                optimizer.step()
        torch.distributed.barrier()  # every rank gets here: nobody waits for a batch that never comes
        print(f"rank {rank}: {3 + rank} batches, weight sum {model.module.weight.sum():.4f}", flush=True)
    finally:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", 0)) as s:  # a free port per job, never a fixed one
        url = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"  # mp.spawn is start_processes with spawn
    torch.multiprocessing.start_processes(train, (2, url), nprocs=2, start_method=method)
    print("both ranks finished their uneven data and met at the barrier")
