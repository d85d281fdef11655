"""A reproducible, fast DataLoader: a sharded IterableDataset, workers seeded by a generator, a timeout.
Run: python 07_dataloader_workers.py [fork|spawn|forkserver]   (default: spawn)"""

import random
import sys

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class Noisy(IterableDataset):  # at module level: a spawn or forkserver worker imports it by name
    def __iter__(self):  # each worker yields its share: every num_workers-th sample from its id
        info = get_worker_info()  # None in the main process (num_workers=0): yield them all
        mine = range(64) if info is None else range(info.id, 64, info.num_workers)
        for j in torch.randperm(len(mine)).tolist():  # its share shuffled, by the worker's seeded torch RNG
            yield torch.tensor([mine[j], torch.rand(()).item(), random.random()])  # "random augmentations"


if __name__ == "__main__":
    method, runs = sys.argv[1] if len(sys.argv) > 1 else "spawn", []
    for _ in range(2):  # two runs; the seeded generator seeds torch, random and NumPy in every worker
        loader = DataLoader(Noisy(), batch_size=8, generator=torch.Generator().manual_seed(0), num_workers=2,
                            multiprocessing_context=method, persistent_workers=True, timeout=60)  # fmt: skip
        runs.append(torch.stack([torch.cat(list(loader)) for epoch in range(2)]))  # two epochs
        del loader  # ends its persistent workers now (left to the exit, they leave pymp-* folders behind)
    same = torch.equal(*runs) and not torch.equal(*runs[0])  # the same in both runs; epoch 2 differs
    once = all(sorted(epoch[:, 0].tolist()) == list(range(64)) for epoch in runs[0])  # each sample once
    print(f"{method}: two runs gave the same batches: {same}; each epoch had each sample once: {once}")
    sys.exit(0 if same and once else 1)
