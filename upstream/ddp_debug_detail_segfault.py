"""DistributedDataParallel on gloo dies with SIGSEGV at construction under TORCH_DISTRIBUTED_DEBUG=DETAIL.

Two CPU ranks, a Linear(4, 1), nothing else. With TORCH_DISTRIBUTED_DEBUG=OFF or INFO it runs; with
DETAIL each rank dies inside DDP's constructor (faulthandler: `_ddp_init_helper`, the line that calls
`self.logger.set_construction_data_and_log`). Plain collectives under DETAIL work. Seen with torch
2.15.0 (PyPI) and 2.13.0+cpu, Python 3.11, Linux x86-64, fork and spawn alike; torch 2.15.0 on
Python 3.15.2: spawn and forkserver crash, and so do ranks forked from a parent that had not
imported torch._dynamo, but ranks forked after the parent imported it survived 9 of 10 runs (the
native frame of the crash: c10d::Logger::set_env_variables).

Run: python ddp_debug_detail_segfault.py [OFF|INFO|DETAIL]  (default DETAIL)
Prints the torch version, then a verdict line; exits 1 where a rank crashed, 0 where it did not.
"""

import faulthandler
import os
import socket
import sys
from datetime import timedelta

LEVEL = sys.argv[1] if len(sys.argv) > 1 else "DETAIL"
os.environ["TORCH_DISTRIBUTED_DEBUG"] = LEVEL  # read when torch.distributed is imported; ranks inherit it

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def rank_main(rank, world_size, port):
    faulthandler.enable()  # on SIGSEGV: the Python stack of the crash
    url = f"tcp://127.0.0.1:{port}"
    dist.init_process_group("gloo", url, rank=rank, world_size=world_size, timeout=timedelta(seconds=60))
    try:
        torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))  # dies here under DETAIL
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, TORCH_DISTRIBUTED_DEBUG={LEVEL}")
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    try:
        mp.spawn(rank_main, args=(2, port), nprocs=2)  # a crashed rank: the others are terminated
    except mp.ProcessExitedException as error:
        print(f"AFFECTED: DDP construction under {LEVEL}: {error}")
        sys.exit(1)
    print(f"DDP constructed under {LEVEL}: not affected")
