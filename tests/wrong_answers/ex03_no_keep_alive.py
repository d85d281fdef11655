"""Wrong: the producer returns right after its sentinel, before the consumer has opened its tensors."""

import torch
from helpers.solutions.ex03_queues import consume  # noqa: F401


def producer(rank: int, q, done, n_items: int) -> None:
    for _ in range(n_items):
        q.put(torch.full((100,), float(rank + 1)))
    q.put(None)  # the mistake: no done.wait(...), so the process may exit before its items are read
