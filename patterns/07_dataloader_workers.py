"""A reproducible, fast DataLoader: seeded shuffling and workers, persistent workers, prefetching, a timeout.
Run: python 07_dataloader_workers.py [fork|spawn|forkserver]   (default: spawn)"""

import random
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Noisy(Dataset):  # at module level: a spawn or forkserver worker imports it by name
    def __len__(self):
        return 64

    def __getitem__(self, i):  # sample i with a "random augmentation" from torch and one from random
        return torch.tensor([i, torch.rand(()).item(), random.random()])


def seed_worker(worker_id):  # PyTorch's recipe: seed any other RNG the workers use from torch's seed
    random.seed(torch.initial_seed() % 2**32)


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    loaders = (DataLoader(Noisy(), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0),
                          worker_init_fn=seed_worker, num_workers=2, multiprocessing_context=method,
                          persistent_workers=True, prefetch_factor=2, timeout=60)
               for run in range(2))  # a generator: each loader, workers too, ends after its run  # fmt: skip
    runs = [torch.stack([torch.cat(list(loader)) for epoch in range(2)]) for loader in loaders]
    same = torch.equal(runs[0], runs[1]) and not torch.equal(runs[0][0], runs[0][1])  # epoch 2 != epoch 1
    print(f"{method}: two runs of 2 epochs x 64 samples gave the same batches: {same}")
    sys.exit(0 if same else 1)
