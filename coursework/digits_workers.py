"""Worker code of the digits assignment: in its own module, because spawn children import it by name.

``python -m helpers.coursework.digits_search`` runs as ``__main__``; a function defined there could not be
found by a spawn child (it re-imports the script as ``__mp_main__``, and ``helpers.launch`` refuses
``__main__`` workers up front). So the workers live here.

Example::

    >>> result = train_digits(0, [0.1], epochs=1, seed=0)
    >>> sorted(result)
    ['accuracy', 'lr', 'pid', 'seconds']
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn

from helpers.digits import accuracy, load_digits_split, make_model

__all__ = ["train_digits"]


def train_digits(rank: int, lrs: list[float], epochs: int, seed: int, batch_size: int = 64) -> dict:
    """Train one model with learning rate ``lrs[rank]``; return its test accuracy and timing.

    Called as ``fn(rank, *args)`` by ``helpers.launch.launch``: the rank picks the learning rate.
    The same ``seed`` for every rank: the same data split, starting weights and batch order, so the
    runs differ only in their learning rate. Data and model: :mod:`helpers.digits`.

    >>> round(train_digits(0, [0.5], epochs=2, seed=0)["accuracy"], 1) > 0.5
    True
    """
    start = time.perf_counter()
    torch.manual_seed(seed)  # the batch order below
    x_train, y_train, x_test, y_test = load_digits_split(seed=seed)
    model = make_model(seed=seed, hidden=(64,))
    optimizer = torch.optim.SGD(model.parameters(), lr=lrs[rank])
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for batch in torch.randperm(len(x_train)).split(batch_size):
            optimizer.zero_grad()
            loss_fn(model(x_train[batch]), y_train[batch]).backward()
            optimizer.step()
    return {
        "lr": lrs[rank],
        "accuracy": accuracy(model, x_test, y_test),
        "seconds": time.perf_counter() - start,
        "pid": os.getpid(),
    }
