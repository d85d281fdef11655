"""Exercise 13, a solution: the file is opened on the first read in each process, never in ``__init__``."""

from __future__ import annotations

import os

from torch.utils.data import Dataset

RECORD = 8  # bytes per record


class Records(Dataset):
    """The numbers stored in the file ``path``, one per 8-byte record."""

    def __init__(self, path: str, count: int):
        self.path, self.count = path, count
        self.file, self.pid = None, None  # opened by the process that reads, on its first read

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> int:
        if self.pid != os.getpid():  # a new worker (or the main process): a handle of its own
            self.file, self.pid = open(self.path, "rb", buffering=0), os.getpid()  # noqa: SIM115 (kept open)
        self.file.seek(i * RECORD)
        return int(self.file.read(RECORD))
