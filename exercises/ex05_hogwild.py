"""Exercise 05 (Hogwild): a training worker that updates a shared model.

Write ``hogwild_worker(rank, model, seed, steps, lr=0.05)``. Several processes run it at once on
the same ``model`` (its parameters are in shared memory). Each worker must

- call ``torch.set_num_threads(1)`` before any other torch op (the workers share the cores, and
  a fork child of a parent that ran multi-threaded ops can hang otherwise: notebook 04);
- seed its own random stream with ``torch.manual_seed(seed + rank)``, so workers draw different
  batches and a run is reproducible;
- build its *own* optimizer, ``torch.optim.SGD(model.parameters(), lr=lr)``;
- run ``steps`` steps: draw ``x, y = helpers.checkers.regression_batch()``, compute
  ``torch.nn.functional.mse_loss(model(x), y)``, zero the gradients, backward, step;
- update the shared parameters in place (the optimizer does), and return the list of the
  ``steps`` loss values as Python floats.

Check with::

    from helpers.checkers import check_ex05; check_ex05()
"""

from __future__ import annotations

import torch


def hogwild_worker(rank: int, model: torch.nn.Module, seed: int, steps: int, lr: float = 0.05) -> list[float]:
    """Train the shared ``model`` for ``steps`` steps; return the losses."""
    raise NotImplementedError("exercise 05: write hogwild_worker")
