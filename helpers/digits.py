"""The data and the model that notebooks 05 (Hogwild), 06 (DDP) and the coursework train.

scikit-learn's bundled handwritten digits (1,797 images of 8x8 pixels, no download), shuffled once
with a fixed seed and split into 1,536 training images (24 batches of 64) and 261 test images;
and a small MLP whose initial weights depend only on a seed. Every process that calls these gets
the same tensors and the same starting weights, so runs can be compared number by number.

Example::

    >>> from helpers.digits import load_digits_split, make_model, accuracy
    >>> x_train, y_train, x_test, y_test = load_digits_split()
    >>> tuple(x_train.shape), tuple(x_test.shape)
    ((1536, 64), (261, 64))
    >>> 0.0 <= accuracy(make_model(seed=0), x_test, y_test) <= 1.0
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch and numpy are imported inside the functions: importing this stays light
    import numpy as np
    import torch
    from torch import nn

__all__ = ["N_TRAIN", "load_digits_split", "make_model", "accuracy"]

N_TRAIN = 1536  # divisible by 64: two ranks x batch 32 cover the same samples as one process x 64


def load_digits_split(
    n_train: int = N_TRAIN, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)``: the digits scaled to [0, 1], shuffled with ``seed``.

    ``x`` is float32 (N x 64), ``y`` int64 labels 0-9; the first ``n_train`` shuffled images train,
    the rest test. Used by notebooks 05 and 06 and by ``coursework``.

    >>> x, y, x_test, y_test = load_digits_split(n_train=1000)
    >>> len(x), len(x_test), x.dtype, float(x.max())
    (1000, 797, torch.float32, 1.0)
    """
    import torch

    images, labels = _bundled_digits()
    if not 0 < n_train < len(images):
        raise ValueError(f"n_train must be between 1 and {len(images) - 1}, got {n_train}")
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))
    x = torch.tensor(images, dtype=torch.float32)[order] / 16.0
    y = torch.tensor(labels, dtype=torch.int64)[order]
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def _bundled_digits() -> tuple[np.ndarray, np.ndarray]:
    """What ``sklearn.datasets.load_digits(return_X_y=True)`` returns, read from the same file.

    Importing scikit-learn costs every process about a second of CPU (scipy comes with it), and every
    DDP rank, Hogwild worker and torchrun worker loads the digits; so the CSV that scikit-learn ships
    is read here directly. ``find_spec`` locates the package without importing it.
    """
    import gzip
    import importlib.util

    import numpy as np

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the digits come with scikit-learn: pip install scikit-learn")
    path = Path(spec.submodule_search_locations[0], "datasets", "data", "digits.csv.gz")
    with gzip.open(path, "rt") as rows:
        data = np.loadtxt(rows, delimiter=",")
    return data[:, :-1], data[:, -1].astype(int)


def make_model(seed: int = 0, hidden: tuple[int, ...] = (32,)) -> nn.Sequential:
    """An MLP 64 -> ``hidden`` (ReLU between) -> 10 whose initial weights depend only on ``seed``.

    The global random state is left as it was. Notebook 06 trains the default (64-32-10); notebook
    05 a wider one, ``hidden=(256, 256)``, so each step has enough work to share out.

    >>> a, b = make_model(seed=0), make_model(seed=0)
    >>> all(bool((p == q).all()) for p, q in zip(a.parameters(), b.parameters()))
    True
    >>> sum(p.numel() for p in make_model(hidden=(256, 256)).parameters())
    85002
    """
    import torch
    from torch import nn

    sizes = (64, *hidden)
    layers: list[nn.Module] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for width_in, width_out in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], 10))
    return nn.Sequential(*layers)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of ``x`` that ``model`` classifies as ``y`` (no gradients, on the model's device).

    Notebooks 05 and 06 evaluate their trained models with it.

    >>> x, y, x_test, y_test = load_digits_split()
    >>> 0.0 <= accuracy(make_model(), x_test, y_test) <= 1.0
    True
    """
    import torch

    device = next(model.parameters()).device
    with torch.no_grad():
        predicted = model(x.to(device)).argmax(dim=1)
    return (predicted == y.to(device)).float().mean().item()
