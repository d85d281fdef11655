"""helpers.overview: notebook 00's first program, under every start method."""

from __future__ import annotations

import multiprocessing as mp

import pytest
import torch

from helpers.overview import square_into
from tests.workers import METHODS


@pytest.mark.spawn_in_notebook("00", "square_into")
@pytest.mark.parametrize("method", METHODS)
def test_children_write_their_squares_into_one_shared_tensor(method):
    ctx = mp.get_context(method)
    shared = torch.zeros(3).share_memory_()
    children = [ctx.Process(target=square_into, args=(shared, rank)) for rank in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=60)
    assert [child.exitcode for child in children] == [0, 0, 0]
    assert shared.tolist() == [0.0, 1.0, 4.0]
