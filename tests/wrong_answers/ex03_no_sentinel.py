"""Wrong: the producer never says "no more"."""

from solutions.ex03_queues import collect  # noqa: F401


def producer(q, n_items: int, item_size: int) -> None:
    for i in range(n_items):
        q.put(bytes([i % 256]) * item_size)
