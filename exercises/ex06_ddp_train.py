"""Exercise 06 (DDP): write a DDP training function and launch it with ``mp.spawn``.

The task: train ``make_model()`` on ``make_data()`` in ``world_size`` processes with DDP, so that
the result is the same as one process training on batches ``world_size`` times as large.

1. ``train(rank, world_size, port, path)`` runs in every rank:

   - it joins a gloo process group of ``world_size`` ranks that meet on 127.0.0.1:``port``, and
     gives up after a minute rather than wait for ever;
   - it trains for ``EPOCHS`` epochs, plain SGD with learning rate ``LR`` on the mean squared
     error, each rank reading its own share of the data in batches of ``BATCH_SIZE``, reshuffled
     every epoch in the same order on every rank (torch's own sampler for this, seeded with
     ``SEED``);
   - rank 0 saves the trained weights to ``path`` so that a plain ``make_model()`` can load them;
   - it leaves the process group however training ends.

2. ``launch(world_size, path)`` finds a free port on 127.0.0.1 and runs ``train`` in
   ``world_size`` processes with ``mp.spawn``.

What the checker compares: it calls ``launch(2, path)`` in a child process (with a deadline), loads
the weights rank 0 saved, and compares them with one process that trains ``make_model()`` with the
same ``EPOCHS``, ``LR`` and loss on batches of ``2 * BATCH_SIZE``, in the order
``DistributedSampler(make_data(), 1, 0, seed=SEED)`` gives epoch after epoch (notebook 06, "What
DDP does"). They must agree to 1e-5. Check with::

    from helpers.checkers import check_ex06; check_ex06()
"""

from __future__ import annotations

import torch
import torch.distributed.nn  # noqa: F401  (given; before any group: notebook 06, "a rank that aborts at exit")
from torch.utils.data import TensorDataset

# Given: the checker trains its single-process reference with these. Do not change them.
EPOCHS, BATCH_SIZE, LR, SEED = 3, 16, 0.1, 0


def make_data() -> TensorDataset:
    """256 samples of a linear regression task, the same in every process."""
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(SEED))
    return TensorDataset(x, x @ torch.linspace(-1.0, 1.0, 8).unsqueeze(1))


def make_model() -> torch.nn.Module:
    """The model every rank starts from."""
    torch.manual_seed(SEED)
    return torch.nn.Linear(8, 1)


def train(rank: int, world_size: int, port: int, path: str) -> None:
    """One DDP rank; rank 0 saves the trained ``state_dict`` to ``path``."""
    raise NotImplementedError("exercise 06: write train")


def launch(world_size: int, path: str) -> None:
    """Start ``world_size`` ranks of :func:`train` with ``mp.spawn``, on a free port."""
    raise NotImplementedError("exercise 06: write launch")
