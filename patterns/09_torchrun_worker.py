"""A torchrun worker: reads RANK, LOCAL_RANK, WORLD_SIZE, joins the group (gloo, env://), all_reduces.
Run: torchrun --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=HOST:29400 ... THIS_FILE
on every node, or python 09_torchrun_worker.py (runs torchrun --standalone: 2 workers, this machine)"""

import os
import subprocess
import sys
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist

if __name__ == "__main__":
    if "RANK" in os.environ:  # torchrun started this process: it is one worker
        rank, local_rank, world_size = (int(os.environ[v]) for v in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
        dist.init_process_group("gloo", timeout=timedelta(seconds=60))  # env://; real jobs: minutes
        try:
            total = torch.tensor([rank + 1.0])
            dist.all_reduce(total)  # 1 + 2 + ... + WORLD_SIZE, the same on every rank of every node
            where = f"local rank {local_rank}, node {os.environ['GROUP_RANK']}"
            print(f"rank {rank}/{world_size} ({where}): all_reduce {total.item():g}")
        finally:
            dist.destroy_process_group()
    else:  # started by hand: torchrun runs 2 workers of this file on this machine
        with tempfile.TemporaryDirectory() as logs:  # without --log-dir, /tmp/torchelastic_* stays behind
            torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
            torchrun += [f"--log-dir={logs}", os.path.abspath(__file__)]
            done = subprocess.run(torchrun, timeout=120)
        if done.returncode != 0:
            sys.exit(f"torchrun failed: exit code {done.returncode}")
        print(f"torchrun ran 2 workers of {os.path.basename(__file__)}: exit code 0")
