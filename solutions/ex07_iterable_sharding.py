"""Reference solution to exercise 07."""

from __future__ import annotations

from collections.abc import Iterator

from torch.utils.data import IterableDataset, get_worker_info


class ShardedRange(IterableDataset):
    """The integers ``start ... end - 1``, each yielded once across all DataLoader workers."""

    def __init__(self, start: int, end: int):
        self.start = start
        self.end = end

    def __iter__(self) -> Iterator[int]:
        info = get_worker_info()
        if info is None:  # num_workers=0: the main process yields everything
            return iter(range(self.start, self.end))
        return iter(range(self.start + info.id, self.end, info.num_workers))  # interleaved shards
