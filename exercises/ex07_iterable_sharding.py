"""Exercise 07 (DataLoader workers): shard an IterableDataset between workers.

Complete ``ShardedRange``, an ``IterableDataset`` that yields the integers ``start ... end - 1``.
With ``DataLoader(ShardedRange(start, end), num_workers=k, batch_size=None)`` every integer must
come out exactly once, for any ``k`` (0 included) and any ``start`` and ``end``. Each worker is a
separate process with its own copy of the dataset: use ``torch.utils.data.get_worker_info()``
(``None`` in the main process) to decide which part each worker yields.

Check with::

    from helpers.checkers import check_ex07; check_ex07()
"""

from __future__ import annotations

from collections.abc import Iterator

from torch.utils.data import IterableDataset


class ShardedRange(IterableDataset):
    """The integers ``start ... end - 1``, each yielded once across all DataLoader workers."""

    def __init__(self, start: int, end: int):
        self.start = start
        self.end = end

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError("exercise 07: write ShardedRange.__iter__")
