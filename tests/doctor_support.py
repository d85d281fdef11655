"""What the doctor's tests share (tests/test_doctor_*.py): run ``check()`` in a fresh interpreter, one
check here, the command line, and a workload that starts OpenMP threads.

Every check is made to pass, and made to warn or fail by inducing the condition for real. Conditions
that belong to a process (threads already started, a forced start method, a low open-file limit, a CPU
affinity) are induced in a fresh interpreter that then runs ``check()`` on itself, so the test process
stays as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.doctor import Finding, check
from helpers.processes import run_python_script

ROOT = Path(__file__).resolve().parent.parent
LINUX = sys.platform.startswith("linux")
linux_only = pytest.mark.skipif(not LINUX, reason="reads /proc (Linux only)")


def check_in_fresh_interpreter(setup: str, call: str = "check()", env: dict | None = None) -> dict[str, dict]:
    """Run ``setup`` then ``call`` in a new interpreter; return its findings by name."""
    source = textwrap.dedent(setup) + textwrap.dedent(f"""
        import dataclasses, json
        from helpers.doctor import check
        print("FINDINGS " + json.dumps([dataclasses.asdict(f) for f in {call}]))
    """)
    old = {key: os.environ.get(key) for key in (env or {})}
    os.environ.update(env or {})
    try:
        done = run_python_script(source, timeout=120)
    finally:
        for key, value in old.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    line = next((x for x in done.stdout.splitlines() if x.startswith("FINDINGS ")), None)
    assert line is not None, done.stderr
    return {f["name"]: f for f in json.loads(line.removeprefix("FINDINGS "))}


def one(name: str, **kwargs) -> Finding:
    (finding,) = check(only=[name], **kwargs)
    assert finding.name == name
    return finding


def stop(child: subprocess.Popen) -> None:
    child.kill()
    child.wait()
    if child.stdout:
        child.stdout.close()


def doctor_cli(*args: str, shell_prefix: str = "") -> subprocess.CompletedProcess:
    command = f"{shell_prefix}{sys.executable} -m helpers.doctor " + " ".join(f"'{a}'" for a in args)
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120, check=False)


OPENMP_THREADS = """\
import torch
torch.set_num_threads(2)
torch.randn(4_000_000, dtype=torch.float64).float()
"""
