"""Notebook 00's first program: a worker that writes its result into a tensor in shared memory.

It lives in a module, not in the notebook, because a spawn (or forkserver) child imports the
function it runs by module and name (notebook 01 shows the failure otherwise).

Example::

    >>> import torch
    >>> from helpers.overview import square_into
    >>> slots = torch.zeros(3)
    >>> square_into(slots, 2)
    >>> slots.tolist()
    [0.0, 0.0, 4.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["square_into"]


def square_into(shared: torch.Tensor, rank: int) -> None:
    """Write ``rank * rank`` into slot ``rank`` of ``shared``, in place
    ([00 · A first program](../notebooks/00_overview.ipynb#a-first-program-four-processes-one-shared-tensor)).

    In place is the point: ``shared[rank] = ...`` writes into the storage every process maps,
    where ``shared = shared + 1`` would only rebind a local name.

    >>> import torch
    >>> slots = torch.zeros(2)
    >>> square_into(slots, 1)
    >>> slots.tolist()
    [0.0, 1.0]
    """
    shared[rank] = rank * rank
