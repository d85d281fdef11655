"""helpers.digits: the same data and the same starting weights in every process."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from helpers.digits import N_TRAIN, accuracy, load_digits_split, make_model


def test_the_split_is_fixed_by_its_seed_and_covers_every_image_once():
    x, y, x_test, y_test = load_digits_split()
    again = load_digits_split()
    assert all(torch.equal(a, b) for a, b in zip((x, y, x_test, y_test), again, strict=True))
    assert len(x) == N_TRAIN and len(x) + len(x_test) == 1797
    assert x.dtype == torch.float32 and 0.0 <= float(x.min()) and float(x.max()) == 1.0
    assert sorted(y.unique().tolist()) == list(range(10))
    other = load_digits_split(seed=1)[0]
    assert not torch.equal(x, other)
    with pytest.raises(ValueError, match="n_train"):
        load_digits_split(n_train=0)


def test_make_model_depends_only_on_its_seed_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    a = make_model(seed=0)
    assert torch.equal(torch.rand(1), expected)
    b, c = make_model(seed=0), make_model(seed=1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a[0].weight, c[0].weight)
    assert [m.out_features for m in make_model(hidden=(8, 4)) if isinstance(m, torch.nn.Linear)] == [8, 4, 10]


def test_accuracy_counts_correct_predictions():
    model = torch.nn.Linear(64, 10)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.copy_(torch.arange(10.0))  # always predicts 9
    x = torch.zeros(4, 64)
    assert accuracy(model, x, torch.tensor([9, 9, 1, 2])) == 0.5


def test_the_digits_are_scikit_learns_own_read_without_importing_it():
    from sklearn.datasets import load_digits

    from helpers.digits import _bundled_digits

    images, labels = _bundled_digits()
    expected_images, expected_labels = load_digits(return_X_y=True)
    assert (images == expected_images).all() and (labels == expected_labels).all()
    assert images.dtype == expected_images.dtype and labels.dtype == expected_labels.dtype
    code = "import sys, helpers.digits as d; d.load_digits_split(); print('sklearn' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "False\n"
