"""Exercise 03 (queues): a producer with a sentinel, and a parent that drains before it joins.

Write two functions:

- ``producer(q, n_items, item_size)``: put ``n_items`` items on ``q``, item ``i`` being
  ``bytes([i % 256]) * item_size``, then put the sentinel ``None`` to say "no more".
- ``collect(n_items, item_size, method="fork")``: create a Queue and a Process with
  ``multiprocessing.get_context(method)``, run ``producer`` in it, read items until the sentinel,
  join the producer (with a timeout), and return the items as a list, in order.

The checker runs ``collect`` in a child process with a deadline, with items big enough that the
order of "read" and "join" matters.

Check with::

    from helpers.checkers import check_ex03; check_ex03()
"""

from __future__ import annotations


def producer(q, n_items: int, item_size: int) -> None:
    """Put ``n_items`` items (``bytes([i % 256]) * item_size``) on ``q``, then ``None``."""
    raise NotImplementedError("exercise 03: write producer")


def collect(n_items: int, item_size: int, method: str = "fork") -> list[bytes]:
    """Run ``producer`` in a child process and return the items it sent, in order."""
    raise NotImplementedError("exercise 03: write collect")
