"""Exercise 13 (field guide: workers and the machine): a reader per DataLoader worker.

Complete ``Records``, a Dataset of the fixed-size records of a file: record ``i`` is the 8 bytes at
offset ``8 * i``, ASCII digits of a number; ``records[i]`` returns that number as an ``int``. A
``DataLoader(Records(path, count), num_workers=2)`` with fork workers must return every record
right. A file opened in ``__init__`` is inherited by every forked worker, which then share its
offset ([13 · A file opened in __init__](../notebooks/13_field_guide_workers_and_machine.ipynb#a-file-opened-in-init-and-shared-by-fork-workers)):
open the file lazily, once in each process that reads. The check also reads a record in the main
process before the loader starts (as ``print(dataset[0])`` does): the workers must still open their own.

Check with::

    from helpers.checkers import check_ex13; check_ex13()
"""

from __future__ import annotations

from torch.utils.data import Dataset

RECORD = 8  # bytes per record


class Records(Dataset):
    """The numbers stored in the file ``path``, one per 8-byte record."""

    def __init__(self, path: str, count: int):
        self.path, self.count = path, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> int:
        raise NotImplementedError("exercise 13: write Records.__getitem__")
