"""Exercise 02 (shared tensors): workers that update a tensor the parent can see.

Write two functions:

- ``make_counter(n)``: return a float32 tensor of ``n`` zeros that child processes can write to and
  the parent then sees, whatever the start method (fork included).
- ``add_rank(rank, counter)``: the worker. Add ``rank + 1`` to every element of ``counter`` so
  that the *parent's* tensor changes.

The checker creates ``counter = make_counter(4)``, runs ``add_rank`` for ranks 0 and 1 in child
processes (under fork and under spawn) and expects the parent to see ``[3., 3., 3., 3.]``.

Check with::

    from helpers.checkers import check_ex02; check_ex02()
"""

from __future__ import annotations

import torch


def make_counter(n: int) -> torch.Tensor:
    """Return ``n`` float32 zeros that child processes can update for the parent to see."""
    raise NotImplementedError("exercise 02: write make_counter")


def add_rank(rank: int, counter: torch.Tensor) -> None:
    """Add ``rank + 1`` to every element of ``counter``, so the parent sees the change."""
    raise NotImplementedError("exercise 02: write add_rank")
