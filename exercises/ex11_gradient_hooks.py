"""Exercise 11 (notebook 11): DDP from gradient hooks.

DDP averages the gradients of all ranks *during* ``backward()``: a hook on every parameter runs as
soon as that parameter's gradient is complete, and all-reduces it. Do the same, one gradient at a
time (no buckets):

``average_in_backward(model)`` registers a hook on every parameter of ``model`` (torch's
``Tensor.register_post_accumulate_grad_hook``: the hook gets the parameter, whose ``.grad`` is
complete) that replaces the parameter's gradient by its mean over the ranks: an all-reduce (SUM)
over the process group, then a division by the world size. It is called once, before training;
after that, every ``loss.backward()`` leaves the mean gradient of all ranks in every ``.grad``.

What the checker does: it starts 2 real ranks (gloo), in each builds ``make_model()``, calls your
``average_in_backward`` on it, and trains it ``STEPS`` steps of SGD (``LR``) on that rank's share of
``make_data()``, beside a ``DistributedDataParallel`` model trained on the same batches. The
gradients after the first ``backward()`` and the weights at the end must equal DDP's to 1e-6
([11 · DDP by hand](../notebooks/11_collectives_and_ddp.ipynb#ddp-by-hand)). Check with::

    from helpers.checkers import check_ex11; check_ex11()
"""

from __future__ import annotations

import torch
import torch.distributed as dist  # noqa: F401  (you will need it)
from torch.utils.data import TensorDataset

# Given: the checker trains with these. Do not change them.
STEPS, BATCH_SIZE, LR, SEED = 8, 16, 0.1, 0


def make_data() -> TensorDataset:
    """256 samples of a linear regression task, the same in every process."""
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(SEED))
    return TensorDataset(x, x @ torch.linspace(-1.0, 1.0, 8).unsqueeze(1))


def make_model() -> torch.nn.Module:
    """The model every rank starts from (the same weights on every rank: no broadcast needed)."""
    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


def average_in_backward(model: torch.nn.Module) -> None:
    """Register, on every parameter of ``model``, a hook that all-reduces its gradient and divides it
    by the world size, as soon as the gradient is complete in ``backward()``."""
    raise NotImplementedError("exercise 11: write average_in_backward")
