"""Exercise 03 (queues): producers and a consumer, the canonical way (notebook 03's pattern).

Write two functions:

- ``producer(rank, q, done, n_items)``: put ``n_items`` tensors on ``q``, each
  ``torch.full((100,), float(rank + 1))``; then put one sentinel, ``None``, to say "this producer
  has finished"; then wait (with a timeout) on the Event ``done`` before returning: the consumer
  opens each tensor's shared memory through its producer, which must still be running then.
- ``consume(n_producers, n_items, method="spawn")``: the parent. Make a Queue and an Event with
  ``torch.multiprocessing.get_context(method)``, start ``n_producers`` producers (ranks 0, 1, ...),
  read the queue until you have seen **one sentinel per producer** (every ``get`` with a timeout),
  adding up ``item.sum().item()`` of every tensor; then ``done.set()``; then join the producers
  (with a timeout), only once the queue is drained. Return the total.

The checker first runs your producer alone against its own consumer, then your ``consume`` in a
child process with a deadline (a hang is killed, and the feedback says why it hung).

Check with::

    from helpers.checkers import check_ex03; check_ex03()
"""

from __future__ import annotations

import torch  # noqa: F401  (you will need it)
import torch.multiprocessing as mp  # noqa: F401  (you will need it)


def producer(rank: int, q, done, n_items: int) -> None:
    """Put ``n_items`` tensors full of ``rank + 1`` on ``q``, then ``None``; wait for ``done``."""
    raise NotImplementedError("exercise 03: write producer")


def consume(n_producers: int, n_items: int, method: str = "spawn") -> float:
    """Start the producers, read until every one has sent its sentinel, join them; return the total."""
    raise NotImplementedError("exercise 03: write consume")
