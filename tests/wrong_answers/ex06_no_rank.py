"""Wrong: forgets rank=..., so every process reads rank 0's share."""

from torch.utils.data import DistributedSampler


def epoch_orders(rank: int, world_size: int, dataset_size: int, epochs: int, seed: int) -> list[list[int]]:
    sampler = DistributedSampler(range(dataset_size), num_replicas=world_size, rank=0, seed=seed)
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders
