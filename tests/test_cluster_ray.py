"""Ray Train runs notebook 06's training (scripts/train_ray.py); needs the optional `cluster` extra.

Not part of `make test` (Ray is a large optional dependency): `make test-cluster` installs the extra
and runs this file. Without Ray installed the test is skipped with that instruction.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.processes import kill_tree, live_children

pytest.importorskip("ray", reason="Ray Train is the optional `cluster` extra: pip install -e '.[cluster]'")

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "train_ray.py"


@pytest.mark.timeout(420)
def test_ray_train_trains_the_digits_model_on_two_workers_like_ddp(tmp_path):
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    try:
        output, _ = process.communicate(timeout=360)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid, grace=10)  # the driver and every Ray process it started
        process.communicate()
        raise
    assert process.returncode == 0, output[-3000:]
    result = json.loads((tmp_path / "ray_result.json").read_text())
    assert result["world_size"] == 2 and result["ranks"] == [0, 1]
    assert result["max_difference_vs_one_process"] < 1e-5  # notebook 06's proof, through Ray
    assert not live_children()
