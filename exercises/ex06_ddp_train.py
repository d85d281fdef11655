"""Exercise 06 (DDP): write a DDP training function and launch it with ``mp.spawn``.

1. ``train(rank, world_size, port, path)`` runs in every rank (as ``ddp.minimal_train`` in notebook 06):

   - join the group: ``dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
     rank=rank, world_size=world_size, timeout=timedelta(seconds=60))``;
   - wrap ``make_model()`` in ``DistributedDataParallel``; ``torch.optim.SGD(..., lr=LR)``;
   - read ``make_data()`` through a ``DataLoader`` with ``batch_size=BATCH_SIZE`` and a
     ``DistributedSampler(data, world_size, rank, seed=SEED)``; call ``set_epoch(epoch)`` at the
     start of each of the ``EPOCHS`` epochs;
   - the loop: ``zero_grad()``, ``torch.nn.functional.mse_loss(model(x), y).backward()``, ``step()``;
   - rank 0 saves the trained weights, ``model.module.state_dict()``, to ``path`` (``torch.save``);
   - ``dist.destroy_process_group()`` in a ``finally``.

2. ``launch(world_size, path)`` picks a free port on 127.0.0.1 and starts ``world_size`` ranks with
   ``mp.spawn(train, args=(...), nprocs=world_size)``.

The checker calls ``launch(2, path)`` in a child process and compares the saved weights with one
process trained on batches of ``2 * BATCH_SIZE`` (notebook 06 §3: they must agree). Check with::

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
