"""Wrong: the workers count from 0, not from start (right only for ShardedRange(0, n))."""

from torch.utils.data import IterableDataset, get_worker_info


class ShardedRange(IterableDataset):
    def __init__(self, start: int, end: int):
        self.start, self.end = start, end

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.start, self.end))
        return iter(range(info.id, self.end, info.num_workers))
