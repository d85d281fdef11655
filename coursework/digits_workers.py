"""Worker code of the digits assignment: in its own module, because spawn children import it by name.

``python -m coursework.digits_search`` runs as ``__main__``; a function defined there could not be
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

__all__ = ["load_split", "make_model", "train_digits"]


def load_split(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """scikit-learn's bundled digits (8x8 images, no download), scaled to [0, 1], split 80/20.

    >>> x_train, y_train, x_test, y_test = load_split()
    >>> x_train.shape[1], len(x_train) + len(x_test)
    (64, 1797)
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    cut = int(0.8 * len(x))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def make_model(hidden: int = 64) -> nn.Module:
    """A small MLP for 8x8 digits: 64 -> ``hidden`` -> 10.

    >>> make_model()(torch.zeros(2, 64)).shape
    torch.Size([2, 10])
    """
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def train_digits(rank: int, lrs: list[float], epochs: int, seed: int, batch_size: int = 64) -> dict:
    """Train one model with learning rate ``lrs[rank]``; return its test accuracy and timing.

    Called as ``fn(rank, *args)`` by ``helpers.launch.launch``: the rank picks the learning rate.
    The same ``seed`` for every rank: the runs differ only in their learning rate.

    >>> round(train_digits(0, [0.5], epochs=2, seed=0)["accuracy"], 1) > 0.5
    True
    """
    start = time.perf_counter()
    torch.manual_seed(seed)
    x_train, y_train, x_test, y_test = load_split(seed)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lrs[rank])
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for batch in torch.randperm(len(x_train)).split(batch_size):
            optimizer.zero_grad()
            loss_fn(model(x_train[batch]), y_train[batch]).backward()
            optimizer.step()
    with torch.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    return {"lr": lrs[rank], "accuracy": accuracy, "seconds": time.perf_counter() - start, "pid": os.getpid()}
