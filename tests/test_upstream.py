"""The reproductions in ``upstream/`` run alone, end within their time, and say what they saw.

Each script prints the torch version first and a verdict last: ``AFFECTED: ...`` with exit code 1
where the defect shows, ``... not affected`` with exit code 0 where it does not (upstream/README.md).
Which one depends on the installed torch, so the test checks that the verdict and the exit code
agree, not which verdict it is; notebook 10 asserts the behaviour it teaches.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "upstream").glob("*.py"))


def test_there_are_reproductions():
    assert SCRIPTS, "upstream/ holds no scripts"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_each_reproduction_prints_its_verdict(script, tmp_path):
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    lines = done.stdout.strip().splitlines()
    assert lines and lines[0].startswith(f"torch {torch.__version__}"), done.stdout + done.stderr[-2000:]
    verdict = lines[-1]
    if done.returncode == 0:
        assert verdict.endswith("not affected"), verdict
    else:
        assert done.returncode == 1 and verdict.startswith("AFFECTED: "), (done.returncode, verdict)
    assert list(tmp_path.iterdir()) == [], "the script left files behind"
