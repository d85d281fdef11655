"""Exercise 09's checker accepts the reference solution and names each typical mistake."""

from __future__ import annotations

import pytest

from helpers.checkers_ex09 import check_ex09


def test_the_solution_passes_on_made_up_clusters_and_in_two_real_torchrun_agents():
    result = check_ex09("solutions.ex09_node_roles")
    assert result.passed, str(result)
    assert "in two real torchrun agents" in result.feedback[-1]


@pytest.mark.parametrize(
    ("wrong", "named"),
    [
        ("ex09_local_rank_as_rank", "LOCAL_RANK starts again from 0 on every node"),
        ("ex09_node_world_size", "LOCAL_WORLD_SIZE counts one node's workers"),
        ("ex09_device_by_rank", "pick the GPU with LOCAL_RANK"),
        ("ex09_writer_per_node", "one writer per node"),
    ],
)
def test_each_typical_mistake_is_named(wrong, named):
    result = check_ex09(f"tests.wrong_answers.{wrong}")
    assert not result.passed and result.attempted
    assert named in " ".join(result.feedback), str(result)


def test_the_starter_file_is_not_attempted_yet():
    result = check_ex09()
    assert not result.passed and not result.attempted
    assert "exercises/ex09_node_roles.py" in result.feedback[0]
