"""The sample assignment runs as a learner would run it: `python -m helpers.coursework.digits_search`,
in a fresh interpreter, from another directory, under spawn; bounded."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.coursework.digits_workers import train_digits

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(400)  # two spawn children import torch and scikit-learn: slow on a busy machine
def test_the_assignment_runs_as_a_script_under_spawn(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "helpers.coursework.digits_search",
            "--lrs",
            "0.05,0.5",
            "--epochs",
            "3",
            "--timeout",
            "240",
        ],
        cwd=tmp_path,  # nothing may depend on the working directory
        env=env,
        capture_output=True,
        text=True,
        timeout=380,
        check=False,
    )
    print(done.stdout, done.stderr[-2000:])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "workers use spawn" in done.stdout
    rows = re.findall(r"^\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)$", done.stdout, re.MULTILINE)
    assert [float(r[0]) for r in rows] == [0.05, 0.5]
    assert len({r[3] for r in rows}) == 2, "one process per learning rate"
    best = float(re.search(r"best learning rate: ([\d.]+)", done.stdout).group(1))
    assert best == 0.5 and max(float(r[1]) for r in rows) > 0.6  # 2 epochs at lr 0.5: ~0.8
    assert "speed-up" in done.stdout
    assert list(tmp_path.iterdir()) == [], "the script wrote files"


def test_train_digits_is_deterministic_for_a_seed():
    first = train_digits(0, [0.5], epochs=1, seed=3)
    again = train_digits(0, [0.5], epochs=1, seed=3)
    assert first["accuracy"] == again["accuracy"]
    assert train_digits(0, [0.5], epochs=1, seed=4)["accuracy"] != first["accuracy"]  # another split
