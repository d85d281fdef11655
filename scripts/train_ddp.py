"""The training of notebook 06 as a script for torchrun (one process per rank, started by torchrun).

    torchrun --nnodes=1 --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:PORT \\
        scripts/train_ddp.py --out DIR [--backend auto|gloo|nccl]

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT in each worker's
environment; ``init_method="env://"`` reads them. Rank 0 writes ``DIR/result.pt`` (final weights,
losses, the environment it saw), which the notebook loads with ``weights_only=True``.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from helpers.ddp import CONFIG, choose_backend, listening_addresses, train_ddp

ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for rank 0's result.pt")
    parser.add_argument(
        "--backend", default="auto", choices=["auto", "gloo", "nccl"], help="auto: nccl with a GPU per rank"
    )
    args = parser.parse_args()
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    backend = choose_backend(world_size) if args.backend == "auto" else args.backend
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    dist.init_process_group(backend, init_method="env://", timeout=timedelta(seconds=60))
    try:
        progress = sys.stderr if rank == 0 else None  # one progress bar, not one per rank
        _, info = train_ddp(rank, world_size, CONFIG, device, progress)
        if rank == 0:
            info["env"] = {key: os.environ[key] for key in ENV_KEYS}
            info["agent_listening"] = listening_addresses(os.getppid())
            info["backend"] = backend
            torch.save(info, Path(args.out) / "result.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
