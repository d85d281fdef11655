"""Leak checks for the whole suite: no child process survives a test, no /dev/shm entry the run.

Also the portability switch: with ``MP_DEFAULT_START_METHOD=spawn`` (or ``forkserver``) the test
process and every notebook kernel nbmake starts run with that default start method, as on macOS /
Windows (spawn) or Linux with Python 3.14+ (forkserver). See ``tests/portability.py``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import pytest

from helpers.environment import default_start_method
from helpers.processes import dev_shm_entries, live_children
from tests.kernel_client import late_replies, poll_in_slices
from tests.portability import apply_forced_start_method, make_ipython_dir


def pytest_configure(config):
    poll_in_slices()  # nbmake's cells: a lost zmq wake-up costs a second, not the per-cell timeout
    method = apply_forced_start_method()
    if method is None:
        return
    # Notebook kernels (nbmake) inherit this environment: an IPython start-up file sets the default.
    ipython_dir = make_ipython_dir(tempfile.mkdtemp(prefix="ipython-mp-default-"), method)
    config.stash[_IPYTHON_DIR] = (ipython_dir, os.environ.get("IPYTHONDIR"))
    os.environ["IPYTHONDIR"] = str(ipython_dir)


def pytest_unconfigure(config):
    ipython_dir, previous = config.stash.get(_IPYTHON_DIR, (None, None))
    if ipython_dir is None:
        return
    shutil.rmtree(ipython_dir, ignore_errors=True)
    if previous is None:
        os.environ.pop("IPYTHONDIR", None)
    else:
        os.environ["IPYTHONDIR"] = previous


def pytest_report_header(config):
    return f"default start method: {default_start_method()} (MP_DEFAULT_START_METHOD to force one)"


def pytest_terminal_summary(terminalreporter):
    if late_replies():
        terminalreporter.write_line(
            f"tests.kernel_client: {late_replies()} kernel message(s) found only when a poll slice "
            "ran out (a lost wake-up: each would otherwise have waited a whole cell timeout)"
        )


def leftover_children(grace: float = 5.0) -> list[str]:
    """Children (multiprocessing's infrastructure aside) still alive after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while True:
        left = [f"pid {c.pid}: {' '.join(c.cmdline())[:200]}" for c in live_children()]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


# pytest-timeout's default (pyproject.toml) suits a unit test; a notebook is one test item made of
# many cells (each also bounded by nbmake's per-cell timeout), so it gets a whole-notebook limit.
NOTEBOOK_TIMEOUT = 900


def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid.endswith(".ipynb") or ".ipynb::" in item.nodeid:
            item.add_marker(pytest.mark.timeout(NOTEBOOK_TIMEOUT))


@pytest.fixture(autouse=True)
def restore_torch_threads():
    """Worker functions called in-process (doctests) set one thread; later tests expect the default."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def no_leftover_children():
    yield
    left = leftover_children()
    assert not left, f"the test left child processes behind: {left}"


def pytest_sessionstart(session):
    session.config.stash[_SHM_BEFORE] = dev_shm_entries()


def pytest_sessionfinish(session, exitstatus):
    # Named semaphores (sem.*) of children killed at a deadline under spawn/forkserver are unlinked by
    # multiprocessing's resource tracker when this process exits: `make test` checks them afterwards
    # (scripts/clean_check.py). Everything else must be gone now.
    new_shm = sorted(
        n for n in dev_shm_entries() - session.config.stash[_SHM_BEFORE] if not n.startswith("sem.")
    )
    left = leftover_children()
    problems = []
    if new_shm:
        problems.append(f"new /dev/shm entries after the run: {new_shm}")
    if left:
        problems.append(f"child processes still alive after the run: {left}")
    if problems:
        print("\nLEAK CHECK FAILED:\n  " + "\n  ".join(problems))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_SHM_BEFORE = pytest.StashKey[set]()
_IPYTHON_DIR = pytest.StashKey[tuple]()
