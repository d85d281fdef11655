"""The suite's own checks: conftest.py's leak checks, run on a small test file in a pytest of its own,
still fail a run under pytest-xdist where they failed a serial one; the same run's timeline
(``PYTEST_TIMELINE``, read by ``python -m tools.timeline``) has a line per test; tools/clean_check.py
finds what a run left in its temporary directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tools.clean_check import left_in

ROOT = Path(__file__).resolve().parents[1]

LEAKY = """
import multiprocessing as mp
import os
import queue
import time
from multiprocessing import shared_memory

RUNS = []


def test_fails_once():  # a deadline that expired once: rerun (RERUN in the Makefile), and the reason kept
    RUNS.append(1)
    if len(RUNS) == 1:
        raise queue.Empty("the first get timed out")


def _linger(parent):
    while os.getppid() == parent:
        time.sleep(0.05)


def test_leaves_a_child():
    mp.get_context("fork").Process(target=_linger, args=(os.getpid(),), daemon=True).start()


def test_leaves_shared_memory():
    shared_memory.SharedMemory(name={name!r}, create=True, size=64).close()  # closed, never unlinked


HELD = []


def test_holds_shared_memory_to_the_end():  # mapped by this worker until it exits: in use, not leaked
    HELD.append(shared_memory.SharedMemory(name={name!r} + "-held", create=True, size=64))
"""


def _pytest(folder: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    shutil.copy(ROOT / "conftest.py", folder / "conftest.py")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MP_DEFAULT_"))}
    environ.update(PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run(
        # Without nbmake (no notebooks here), which imports nbformat and jsonschema: 1 CPU-s a process.
        # --confcutdir: only the copy of conftest.py. Under `make test` the folder is inside the
        # repository (TMPDIR=.venv/clean-check/tmp), whose conftest.py pytest would load as well.
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:nbmake", "--rootdir", str(folder)]
        + ["--confcutdir", str(folder), *args, str(folder)],
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
    """One pytest on two workers, as `make test` runs it, over a small file that leaks a child and a
    /dev/shm segment, and holds another segment to the end."""
    folder = tmp_path_factory.mktemp("suite")
    name = f"leak-check-{uuid.uuid4().hex[:12]}"
    (folder / "test_leaky.py").write_text(LEAKY.format(name=name))
    try:
        reruns = ("--reruns", "1", "--only-rerun", "^Empty: ")
        done = _pytest(folder, "-n", "2", *reruns, env={"PYTEST_TIMELINE": str(folder / "timeline.tsv")})
    finally:
        for entry in (Path("/dev/shm", name), Path("/dev/shm", f"{name}-held")):
            entry.unlink(missing_ok=True)
    return folder, name, done


def test_leaks_fail_the_run_under_xdist_too(run_under_xdist):
    _, name, done = run_under_xdist
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    # In the worker that ran it, after the test: a child of that worker, found by its own check.
    assert "FAILED" in out and "test_leaves_a_child" in out and "left child processes behind" in out, out
    # After every worker finished, before any exited (its resource tracker would unlink the entry);
    # the segment a worker still maps is in use (another stage's, when stages run side by side). The
    # line may name more: under `make test` this run sees the other workers' entries too (in a CI run,
    # a torch_* segment of another test's, held by no process for over 5 s).
    shm = [
        line for line in out.splitlines() if "new /dev/shm entries after the run, held by no process:" in line
    ]
    assert "LEAK CHECK FAILED" in out and len(shm) == 1, out
    assert f"'{name}'" in shm[0] and f"'{name}-held'" not in shm[0], out
    # A rerun is named, with the error line that caused it (conftest.pytest_terminal_summary).
    assert "RERUN REASON test_leaky.py::test_fails_once: E" in out and "the first get timed out" in out, out


def test_the_timeline_has_a_line_per_test_and_says_where_the_time_went(run_under_xdist):
    from tools.timeline import read, report

    folder, _, _ = run_under_xdist
    rows = read(folder / "timeline.tsv")
    assert sorted(r[5].split("::")[1] for r in rows) == [
        "test_fails_once",
        "test_holds_shared_memory_to_the_end",
        "test_leaves_a_child",
        "test_leaves_shared_memory",
    ]
    assert {r[0] for r in rows} <= {"gw0", "gw1"} and all(r[1] <= r[2] and r[3] >= 0 for r in rows), rows
    text = report(rows)
    assert text.startswith("4 tests; first start to last end") and "test_leaky.py" in text, text


def test_the_clean_check_finds_what_a_run_left_in_its_temporary_directory(tmp_path):
    def clean_check(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, str(ROOT / "tools" / "clean_check.py"), *args, str(tmp_path)]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)

    # Only the temporary directory's line is read: this runs beside other tests, whose children come
    # and go in /dev/shm, which the same compare also reports.
    assert clean_check("save").returncode == 0
    (tmp_path / "tmp" / "torchinductor_someone").mkdir()  # a cache, kept by design
    kept = clean_check("compare")
    assert "temporary directory" not in kept.stdout, kept.stdout
    (tmp_path / "tmp" / "pytorch-errorfile-x.pickle").write_bytes(b"")
    left = clean_check("compare")
    assert left.returncode == 1, left.stdout
    assert "temporary directory" in left.stdout, left.stdout
    assert "['pytorch-errorfile-x.pickle']" in left.stdout, left.stdout
    (tmp_path / "tmp" / "pytorch-errorfile-x.pickle").unlink()
    (tmp_path / "tmp" / "pymp-abc").mkdir()  # multiprocessing's folder of a process killed before its exit
    left = clean_check("compare")
    assert left.returncode == 1 and "['pymp-abc']" in left.stdout, left.stdout


def test_a_torch_shm_manager_folder_is_given_time_to_go_and_reported_if_it_stays(tmp_path):
    lingering = tmp_path / "torch-shm-dir-abc123"  # the manager removes it a moment after it exits
    lingering.mkdir()
    remover = threading.Timer(1.0, lingering.rmdir)
    remover.start()
    try:
        assert left_in(tmp_path, wait=10) == []
    finally:
        remover.cancel()
    stays = tmp_path / "torch-shm-dir-def456"  # a manager that was killed: it stays
    stays.mkdir()
    (tmp_path / "pymp-abc").mkdir()  # beside another leftover: both reported, without waiting
    assert left_in(tmp_path, wait=10) == ["pymp-abc", "torch-shm-dir-def456"]
    (tmp_path / "pymp-abc").rmdir()
    assert left_in(tmp_path, wait=1) == ["torch-shm-dir-def456"]
