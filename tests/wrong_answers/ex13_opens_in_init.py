"""Wrong: the file is opened in ``__init__``; forked workers share one handle and its offset."""

from torch.utils.data import Dataset

RECORD = 8


class Records(Dataset):
    def __init__(self, path: str, count: int):
        self.file, self.count = open(path, "rb", buffering=0), count  # noqa: SIM115 (the mistake)

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        self.file.seek(i * RECORD)
        return int(self.file.read(RECORD))
