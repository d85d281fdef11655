"""Reference solution to exercise 06."""

from __future__ import annotations

from torch.utils.data import DistributedSampler


def epoch_orders(rank: int, world_size: int, dataset_size: int, epochs: int, seed: int) -> list[list[int]]:
    """Return, per epoch, the indices that ``rank`` reads."""
    sampler = DistributedSampler(
        range(dataset_size), num_replicas=world_size, rank=rank, shuffle=True, seed=seed
    )
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # without it every epoch repeats the same order
        orders.append(list(sampler))
    return orders
