"""Notebook 06's training on Ray Train: ``TorchTrainer`` with two workers on a local Ray runtime.

    pip install -e '.[cluster]'          # Ray is an optional extra
    python scripts/train_ray.py --out DIR [--workers 2]

Ray, not torchrun, starts the workers (Ray actors), sets up their process group (gloo on CPU) and
sends them ``train_loop`` with cloudpickle, *by value*: a function defined in a notebook would run
there too, which ``spawn`` cannot do (notebook 01). The loop is notebook 06's with two Ray calls:
``prepare_model`` (wraps the model in DDP on the worker's device) and ``report``. Ray's node
address is 127.0.0.1 and its files go to a temporary folder. Rank 0's final weights go to
``DIR/ray_weights.pt``; ``DIR/ray_result.json`` holds the world size, ranks, wall time and the
largest difference to one process with batch 2 x 32 (notebook 06's proof).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def train_loop(config: dict) -> None:
    """One Ray Train worker: notebook 06's loop; Ray has already formed the process group."""
    import ray.train
    import torch
    import torch.nn.functional as F
    from ray.train.torch import prepare_model
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    from helpers.ddp import BATCH_SIZE, EPOCHS, LR, SEED
    from helpers.digits import load_digits_split, make_model

    torch.set_num_threads(1)
    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()
    x, y, _, _ = load_digits_split()
    model = prepare_model(make_model(seed=SEED))  # DDP around the model, on this worker's device
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    sampler = DistributedSampler(TensorDataset(x, y), world_size, rank, seed=SEED)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH_SIZE, sampler=sampler)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for inputs, labels in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(inputs), labels).backward()
            optimizer.step()
    if rank == 0:
        torch.save(model.module.state_dict(), Path(config["out"]) / "ray_weights.pt")
    with open(Path(config["out"]) / f"ray_rank{rank}.json", "w") as report:
        json.dump({"rank": rank, "world_size": world_size, "pid": os.getpid()}, report)
    ray.train.report({"rank": rank})


def main() -> None:
    import ray
    import torch
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from helpers.ddp import BATCH_SIZE, max_param_difference, train_single

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for ray_weights.pt and ray_result.json")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    out = Path(args.out).resolve()
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="ray-") as ray_files:  # short: Ray's socket paths are limited
        ray.init(
            num_cpus=args.workers, include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=ray_files
        )
        try:
            trainer = TorchTrainer(
                train_loop,
                train_loop_config={"out": str(out)},
                scaling_config=ScalingConfig(num_workers=args.workers, use_gpu=False),
                run_config=RunConfig(name="digits", storage_path=str(Path(ray_files) / "results")),
            )
            trainer.fit()
        finally:
            ray.shutdown()
    seconds = time.time() - start
    weights = torch.load(out / "ray_weights.pt", weights_only=True)
    reference = train_single(batch_size=args.workers * BATCH_SIZE)
    ranks = [json.loads((out / f"ray_rank{r}.json").read_text()) for r in range(args.workers)]
    result = {
        "ray": ray.__version__,
        "world_size": ranks[0]["world_size"],
        "ranks": [r["rank"] for r in ranks],
        "seconds": round(seconds, 1),
        "max_difference_vs_one_process": max_param_difference(weights, reference),
        "load_average": os.getloadavg(),
    }
    (out / "ray_result.json").write_text(json.dumps(result))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
