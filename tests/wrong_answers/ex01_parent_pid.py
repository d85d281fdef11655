"""Wrong: reports the parent's pid (os.getppid) instead of its own."""

import os


def describe(rank: int, scale: int) -> dict:
    return {"rank": rank, "value": scale * (rank + 1), "pid": os.getppid()}
