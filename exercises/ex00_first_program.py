"""Exercise 00 (overview): your first program: processes that write into one shared tensor.

Write two functions, as in
[00 · A first program](../notebooks/00_overview.ipynb#a-first-program-four-processes-one-shared-tensor) (read
it again first, then write them without
looking):

- ``fill_row(table, rank)``, the worker: write ``rank * rank`` into ``table[rank, 0]`` and this
  process's id (``os.getpid()``) into ``table[rank, 1]``, in place.
- ``fill_table(nprocs, method="spawn")``, the parent: create a ``(nprocs, 2)`` tensor of zeros with
  ``dtype=torch.int64`` that every process can write into, start ``nprocs`` processes of start
  method ``method`` (``torch.multiprocessing.get_context(method)``), process ``rank`` running
  ``fill_row(table, rank)``; join each with a timeout; return the tensor.

The worker lives in this file, an importable module, so a spawn child can import it by name.
The checker runs ``fill_table`` in real processes, with ``"spawn"`` and (on Linux and macOS) with
``"fork"``, and reads the rows back: the squares show that the writes reached the parent, the
process ids that each row was written by a process of its own.

Check with::

    from helpers.checkers import check_ex00; check_ex00()
"""

from __future__ import annotations

import os  # noqa: F401  (you will need it)

import torch
import torch.multiprocessing as mp  # noqa: F401  (you will need it)


def fill_row(table: torch.Tensor, rank: int) -> None:
    """Write ``rank * rank`` and this process's id into row ``rank`` of ``table``, in place."""
    raise NotImplementedError("exercise 00: write fill_row")


def fill_table(nprocs: int = 4, method: str = "spawn") -> torch.Tensor:
    """Start ``nprocs`` processes that each fill their own row of one shared tensor; return it."""
    raise NotImplementedError("exercise 00: write fill_table")
