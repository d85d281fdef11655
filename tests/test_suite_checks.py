"""The suite's own machinery (conftest.py, tests/start_method_probe.py), run on small test files in a
pytest of their own: the leak checks still fail a run under pytest-xdist where they failed a serial
one, and the probe finds exactly the tests that depend on the default start method."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LEAKY = """
import multiprocessing as mp
import os
import time
from multiprocessing import shared_memory


def _linger(parent):
    while os.getppid() == parent:
        time.sleep(0.05)


def test_leaves_a_child():
    mp.get_context("fork").Process(target=_linger, args=(os.getpid(),), daemon=True).start()


def test_leaves_shared_memory():
    shared_memory.SharedMemory(name={name!r}, create=True, size=64).close()  # closed, never unlinked
"""

PROBED = """
import multiprocessing as mp


def test_default_queue():
    mp.Queue().close()


def test_explicit_context():
    mp.get_context("spawn").Queue().close()


def _in_child(out):
    out.put(mp.get_start_method())


def test_default_read_in_a_forked_child():
    ctx = mp.get_context("fork")
    out = ctx.SimpleQueue()
    child = ctx.Process(target=_in_child, args=(out,))
    child.start()
    child.join(30)
    assert out.get() and child.exitcode == 0  # the child read the default; this process did not


def test_nothing():
    pass
"""


def _pytest(folder: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    shutil.copy(ROOT / "conftest.py", folder / "conftest.py")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MP_DEFAULT_"))}
    environ.update(PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run(
        # Without nbmake (no notebooks here), which imports nbformat and jsonschema: 1 CPU-s a process.
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:nbmake", "--rootdir", str(folder)]
        + [*args, str(folder)],
        cwd=folder,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


# Each pytest (and its xdist workers) starts afresh: slow to start on a loaded machine.
pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def run_under_xdist(tmp_path_factory) -> tuple[Path, str, subprocess.CompletedProcess]:
    """One pytest on two workers, as `make test` runs it, over two small files: one leaks a child
    and a /dev/shm segment, the other uses the default start method in two of its four tests."""
    folder = tmp_path_factory.mktemp("suite")
    name = f"leak-check-{uuid.uuid4().hex[:12]}"
    (folder / "test_leaky.py").write_text(LEAKY.format(name=name))
    (folder / "test_probed.py").write_text(PROBED)
    try:
        done = _pytest(folder, "-n", "2")
    finally:
        with_leak = Path("/dev/shm", name)
        if with_leak.exists():
            with_leak.unlink()
    return folder, name, done


def test_leaks_fail_the_run_under_xdist_too(run_under_xdist):
    _, name, done = run_under_xdist
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    # In the worker that ran it, after the test: a child of that worker, found by its own check.
    assert "FAILED" in out and "test_leaves_a_child" in out and "left child processes behind" in out, out
    # After every worker finished, before any exited (its resource tracker would unlink the entry).
    assert "LEAK CHECK FAILED" in out and f"new /dev/shm entries after the run: ['{name}'" in out, out


def test_the_probe_finds_what_uses_the_default_start_method(run_under_xdist):
    # Under xdist, as `make test` runs it: the workers measure, the controller stores.
    folder, _, done = run_under_xdist
    failing = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert failing and all("test_leaky.py" in line for line in failing), done.stdout  # only the leaks
    cache = folder / ".pytest_cache" / "v" / "torch-mp" / "default-start-method"
    measured = json.loads(cache.read_text())
    assert [n.split("::")[1] for n in measured["used"]] == [
        "test_default_queue",
        "test_default_read_in_a_forked_child",
    ]
    assert len(measured["seen"]) == 6
    forced = _pytest(folder, "--default-dependent-only", env={"MP_DEFAULT_START_METHOD": "spawn"})
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "2 tests measured using the default" in forced.stdout, forced.stdout
    # Python 3.14 adds ", 1 warning": its DeprecationWarning on fork() in a process with threads.
    assert re.search(r" 2 passed, 4 deselected(, \d+ warnings?)? in ", forced.stdout), forced.stdout


class _Item:
    def __init__(self, nodeid: str, timeout: float | None = None):
        self.nodeid, self.timeout = nodeid, timeout

    def get_closest_marker(self, name):
        return pytest.mark.timeout(self.timeout).mark if self.timeout else None


class _Config:
    def getini(self, name):
        return 120


def test_longest_work_first_and_the_browser_test_in_two():
    from tests import scheduling

    browser = scheduling.BROWSER_MODULE + "::test_notebook_runs_in_jupyterlab"
    items = [
        _Item("tests/test_many.py::a"),
        _Item("tests/test_many.py::b"),
        _Item("tests/test_one.py::a"),
        _Item("tests/test_slow.py::a", timeout=600),
        _Item("notebooks/00_a.ipynb::00_a.ipynb", timeout=900),
        _Item("notebooks/01_b.ipynb::01_b.ipynb", timeout=900),
        *(_Item(f"{browser}[{n:02d}_x.ipynb]", timeout=390) for n in range(4)),
    ]
    scheduling.pytest_collection_modifyitems(_Config(), items)
    assert [i.nodeid.rsplit("::", 1)[-1] for i in items] == [
        *(f"test_notebook_runs_in_jupyterlab[{n:02d}_x.ipynb]" for n in (0, 2, 1, 3)),
        "01_b.ipynb",
        "00_a.ipynb",
        "a",  # test_slow
        "a",  # test_many, most tests first
        "b",
        "a",  # test_one
    ]
    assert [scheduling.scope_of(i.nodeid) for i in items[:4]] == [
        scheduling.BROWSER_MODULE + "::even"
    ] * 2 + [scheduling.BROWSER_MODULE + "::odd"] * 2
    assert scheduling.scope_of("tests/test_x.py::Class::test") == "tests/test_x.py::Class"  # xdist's rule


@pytest.mark.parametrize(
    ("line", "serial"),
    [
        ("assert time.monotonic() - start < 30 and gone(pid)", True),
        ("assert 0.55 <= seconds < 1.5", True),
        ("assert result.seconds < 10", True),
        ("assert elapsed > 1 and elapsed < 5", True),
        ("assert speedup > 1.5", True),
        ('assert run["wall"] > 0 and 0.0 <= run["accuracy"] <= 1.0', False),  # no bound on the time
        ("assert all(r['seconds'] > 0 for r in rows)", False),
        ("assert speedup_label == 'x' or count > 2", False),
    ],
)
def test_the_serial_rule_reads_time_bounds_not_other_comparisons(line, serial):
    from conftest import TIMED_ASSERT

    assert bool(TIMED_ASSERT.search(f"def test():\n    {line}\n")) == serial
