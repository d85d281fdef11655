"""Wrong: the producer never says "no more"."""

import torch
from helpers.solutions.ex03_queues import consume  # noqa: F401


def producer(rank: int, q, done, n_items: int) -> None:
    for _ in range(n_items):
        q.put(torch.full((100,), float(rank + 1)))
    done.wait(timeout=60)
