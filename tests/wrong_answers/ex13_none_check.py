"""Wrong: opens lazily with ``if self.file is None``; a record read in the main process before the
loader starts opens the file there, and the forked workers inherit that handle and its offset."""

from torch.utils.data import Dataset

RECORD = 8


class Records(Dataset):
    def __init__(self, path: str, count: int):
        self.path, self.count, self.file = path, count, None

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if self.file is None:  # the mistake: None in a fresh process, not in a forked one
            self.file = open(self.path, "rb", buffering=0)  # noqa: SIM115
        self.file.seek(i * RECORD)
        return int(self.file.read(RECORD))
