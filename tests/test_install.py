"""tools/install_torch.py: which torch build an install takes, and the lock it installs within.

Nothing is downloaded: the decision is a pure function, and the script's --dry-run prints the pip
commands it would run (with the GPU and the CPU-only index's reachability given, not probed).
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from helpers.environment import TESTED_PYTHONS, TESTED_TORCH

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "install_torch.py"
_spec = importlib.util.spec_from_file_location("install_torch", SCRIPT)
it = importlib.util.module_from_spec(_spec)
sys.modules["install_torch"] = it  # dataclasses look their module up
_spec.loader.exec_module(it)

CPU = it.CPU_INDEX


@pytest.mark.parametrize(
    ("system", "build", "gpu", "reachable", "expected_build", "expected_index"),
    [
        # Linux, auto: the GPU decides
        ("Linux", "auto", False, True, "cpu", CPU),
        ("Linux", "auto", False, False, "default", None),  # the fallback
        ("Linux", "auto", True, True, "default", None),
        ("Linux", "auto", True, False, "default", None),
        # Linux, explicit
        ("Linux", "cpu", True, True, "cpu", CPU),
        ("Linux", "cpu", False, False, "default", None),
        ("Linux", "cuda", False, True, "default", None),
        # macOS and Windows: their default build, whatever is asked
        ("Darwin", "auto", False, True, "default", None),
        ("Darwin", "cpu", False, True, "default", None),
        ("Windows", "auto", True, True, "default", None),
        ("Windows", "cpu", False, True, "default", None),
    ],
)
def test_the_choice_of_build(system, build, gpu, reachable, expected_build, expected_index):
    plan = it.choose(system, build, gpu=gpu, index_reachable=reachable)
    assert (plan.build, plan.index) == (expected_build, expected_index)
    if system == "Linux" and build != "cuda" and not gpu and not reachable:
        assert "could not be reached" in plan.reason


def test_the_script_s_examples_hold():
    assert doctest.testmod(it).failed == 0


def test_an_unknown_build_is_refused():
    with pytest.raises(ValueError, match="auto, cpu or cuda"):
        it.choose("Linux", "rocm", gpu=False, index_reachable=True)


def test_the_cpu_plan_takes_torch_alone_from_the_cpu_index_with_short_timeouts():
    plan = it.choose("Linux", "auto", gpu=False, index_reachable=True)
    first, second = it.pip_commands("py", plan, TESTED_TORCH, "c.txt", ".[dev]")
    assert first[4:] == [
        f"torch=={TESTED_TORCH}+cpu",
        "--index-url",
        CPU,
        "--no-deps",
        "--timeout",
        "10",
        "--retries",
        "1",
    ]
    assert second[4:] == ["-e", ".[dev]", f"torch=={TESTED_TORCH}", "-c", "c.txt"]  # X+cpu satisfies it
    fallback = it.choose("Linux", "auto", gpu=False, index_reachable=False)
    (only,) = it.pip_commands("py", fallback, TESTED_TORCH, "c.txt", ".[dev]")
    assert only == second and CPU not in only


def test_the_environment_s_packages_are_byte_compiled_beyond_what_was_imported():
    """pip installs with --no-compile and install_torch.py compiles site-packages on every core: no
    module is left to be compiled at its first import (in every process where the bytecode is not
    written: PYTHONDONTWRITEBYTECODE). sympy.physics: compiled at install, imported by nothing here."""
    import sympy

    physics = Path(sympy.__file__).parent / "physics"
    sources = sorted(physics.rglob("*.py"))
    missing = [p for p in sources if not Path(importlib.util.cache_from_source(str(p))).exists()]
    assert len(sources) > 50 and missing == [], missing[:5]
    assert sysconfig.get_paths()["purelib"] in it.site_packages(sys.executable)


def dry_run(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU-only index is a Linux choice")
def test_the_dry_run_prints_the_pip_commands_for_each_case():
    locked = it.locked_torch()
    no_gpu = dry_run("--gpu", "no", "--index-reachable", "yes")
    assert no_gpu[0] == f"torch {locked}: CPU-only index (no NVIDIA GPU found)"
    assert f"torch=={locked}+cpu --index-url {CPU} --no-deps" in no_gpu[1]
    assert no_gpu[2].endswith(f"torch=={locked} -c CONSTRAINTS")
    unreachable = dry_run("--gpu", "no", "--index-reachable", "no")
    assert unreachable[0].endswith("(no NVIDIA GPU found, but the CPU-only index could not be reached)")
    assert len(unreachable) == 2 and CPU not in unreachable[1]
    gpu = dry_run("--gpu", "yes", "--index-reachable", "yes", "--version", "2.11.0")
    assert gpu == [gpu[0], gpu[1]] and "torch==2.11.0 -c CONSTRAINTS" in gpu[1] and CPU not in gpu[1]
    assert dry_run("--build", "cpu", "--gpu", "yes", "--index-reachable", "yes")[0].endswith(
        "(TORCH_BUILD=cpu)"
    )


def test_an_index_that_never_answers_is_given_up_within_the_probe_time():
    with socket.create_server(("127.0.0.1", 0)) as server:  # accepts connections, never answers
        port = server.getsockname()[1]
        started = time.monotonic()
        assert not it.reachable(f"http://127.0.0.1:{port}/whl/cpu/torch/", seconds=1.0)
        assert time.monotonic() - started < 10.0  # gave up: not a hang
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    assert not it.reachable(f"http://127.0.0.1:{port}/", seconds=1.0)  # refused


# --- The lock ---------------------------------------------------------------------------------------


def test_the_lock_pins_the_tested_torch_and_one_for_every_tested_python():
    oldest, newest = TESTED_PYTHONS
    assert it.locked_torch(python=(3, 11, 7)) == TESTED_TORCH  # one definition, checked against the lock
    assert it.locked_torch(python=(*newest, 0)) == TESTED_TORCH
    # The oldest may get an older torch (torch 2.15 needs Python 3.11+), never a newer one.
    on_oldest = it.locked_torch(python=(*oldest, 0))
    assert version_tuple(on_oldest) <= version_tuple(TESTED_TORCH), on_oldest


def version_tuple(version: str) -> tuple[int, ...]:
    """The release numbers of a version string, a local part such as ``+cpu`` left out."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0]))


def test_the_lock_is_uv_s_output_for_pyproject_and_make_lock_refreshes_it():
    lock = it.LOCK.read_text()
    assert lock.startswith("# This file was autogenerated by uv via the following command:\n#    make lock\n")
    makefile = (ROOT / "Makefile").read_text()
    assert "uv pip compile pyproject.toml --extra dev --universal" in makefile and "-o $(LOCK)" in makefile
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    torch = [d for d in project["dependencies"] if re.match(r"torch\b", d)]
    assert torch == ["torch>=2.11"]  # no upper cap
    direct = {re.split(r"[<>=!~;\[ ]", d)[0].lower() for d in project["dependencies"]}
    pinned = {name for name, _, _ in it._lock_entries(it.LOCK)}
    assert direct <= pinned


def test_constraints_never_pin_torch_and_another_torch_drops_what_only_torch_needs():
    full = it.constraints()
    other = it.constraints(keep_torch_deps=False)
    assert not re.search(r"^torch==", full, flags=re.M) and not re.search(r"^torch==", other, flags=re.M)
    names = {line.split("==")[0] for line in other.splitlines()}
    assert {"setuptools", "sympy", "triton"}.isdisjoint(names)  # torch 2.11.0 wants setuptools<82
    assert not any(name.startswith("nvidia-") for name in names)
    assert {"numpy", "jinja2", "jupyterlab"} <= names  # jinja2: torch's and Jupyter's
    assert re.search(r"^setuptools==", full, flags=re.M) and re.search(r"^nvidia-", full, flags=re.M)


def test_markers_are_read_for_this_python():
    assert it._marker_true("python_full_version < '3.11'", (3, 10, 14))
    assert not it._marker_true("python_full_version >= '3.11' and python_full_version < '3.15'", (3, 15, 0))
    assert it._marker_true("python_full_version == '3.11.*'", (3, 11, 7))
    assert it._marker_true("python_full_version < '3.11.5'", (3, 11, 4))


def test_the_makefile_takes_torch_from_the_lock_unless_told():
    # A `make test TORCH_VERSION=...` around this test passes its variables down in MAKEFLAGS
    outer = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "TORCH_VERSION", "TORCH_BUILD"}
    env = {name: value for name, value in os.environ.items() if name not in outer}

    def setup_line(*assignments: str) -> str:
        done = subprocess.run(
            ["make", "-n", "--always-make", "setup", *assignments],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        (line,) = [line for line in done.stdout.splitlines() if "install_torch.py" in line]
        return line

    here = it.locked_torch(python=sys.version_info[:3])
    assert setup_line(f"PYTHON={sys.executable}").endswith(f"--version {here} --build auto")
    assert setup_line("TORCH_VERSION=2.11.0", "TORCH_BUILD=cpu").endswith("--version 2.11.0 --build cpu")
