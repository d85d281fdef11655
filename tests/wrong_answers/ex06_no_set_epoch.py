"""Wrong: never calls set_epoch, so every epoch repeats the same order."""

from torch.utils.data import DistributedSampler


def epoch_orders(rank: int, world_size: int, dataset_size: int, epochs: int, seed: int) -> list[list[int]]:
    sampler = DistributedSampler(range(dataset_size), num_replicas=world_size, rank=rank, seed=seed)
    return [list(sampler) for _ in range(epochs)]
