"""Exercise 06 (DDP): what each rank reads, epoch after epoch, with a DistributedSampler.

Write ``epoch_orders(rank, world_size, dataset_size, epochs, seed)``. It runs in each of
``world_size`` processes (as a DDP worker started by ``mp.spawn`` would). Build a
``torch.utils.data.DistributedSampler`` over a dataset of ``dataset_size`` items (e.g.
``range(dataset_size)``) for this rank, shuffled with ``seed``, and return, for each of ``epochs``
epochs, the list of indices this rank reads in that epoch (``list(sampler)``).

No process group is needed: pass ``num_replicas`` and ``rank`` to the sampler yourself. The
checker expects the ranks to split each epoch's data between them, and a new order every epoch.

Check with::

    from helpers.checkers import check_ex06; check_ex06()
"""

from __future__ import annotations


def epoch_orders(rank: int, world_size: int, dataset_size: int, epochs: int, seed: int) -> list[list[int]]:
    """Return, per epoch, the indices that ``rank`` reads."""
    raise NotImplementedError("exercise 06: write epoch_orders")
