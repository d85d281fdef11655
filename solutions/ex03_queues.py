"""Reference solution to exercise 03: notebook 03's producer/consumer pattern."""

from __future__ import annotations

import torch
import torch.multiprocessing as mp


def producer(rank: int, q, done, n_items: int) -> None:
    """Put ``n_items`` tensors full of ``rank + 1`` on ``q``, then ``None``; wait for ``done``."""
    for _ in range(n_items):
        q.put(torch.full((100,), float(rank + 1)))
    q.put(None)  # the sentinel: this producer has finished
    done.wait(timeout=60)  # stay alive while the consumer opens our tensors


def consume(n_producers: int, n_items: int, method: str = "spawn") -> float:
    """Start the producers, read until every one has sent its sentinel, join them; return the total."""
    ctx = mp.get_context(method)
    q, done = ctx.Queue(), ctx.Event()
    producers = [ctx.Process(target=producer, args=(rank, q, done, n_items)) for rank in range(n_producers)]
    for p in producers:
        p.start()
    total, finished = 0.0, 0
    while finished < n_producers:  # one sentinel per producer
        item = q.get(timeout=60)
        if item is None:
            finished += 1
        else:
            total += item.sum().item()
    done.set()
    for p in producers:
        p.join(timeout=60)  # after draining the queue
    return total
