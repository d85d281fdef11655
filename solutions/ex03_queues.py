"""Reference solution to exercise 03."""

from __future__ import annotations

import multiprocessing as mp


def producer(q, n_items: int, item_size: int) -> None:
    """Put ``n_items`` items (``bytes([i % 256]) * item_size``) on ``q``, then ``None``."""
    for i in range(n_items):
        q.put(bytes([i % 256]) * item_size)
    q.put(None)  # the sentinel: "no more items"


def collect(n_items: int, item_size: int, method: str = "fork") -> list[bytes]:
    """Run ``producer`` in a child process and return the items it sent, in order."""
    ctx = mp.get_context(method)
    q = ctx.Queue()
    p = ctx.Process(target=producer, args=(q, n_items, item_size))
    p.start()
    items = []
    while (item := q.get(timeout=30)) is not None:  # drain first ...
        items.append(item)
    p.join(timeout=30)  # ... then join: the producer can only exit once its items left the pipe
    return items
