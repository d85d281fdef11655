"""Leak checks for the whole suite: no child process survives a test, no /dev/shm entry the run."""

from __future__ import annotations

import time

import pytest

from helpers.processes import dev_shm_entries, live_children


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
def no_leftover_children():
    yield
    left = leftover_children()
    assert not left, f"the test left child processes behind: {left}"


def pytest_sessionstart(session):
    session.config.stash[_SHM_BEFORE] = dev_shm_entries()


def pytest_sessionfinish(session, exitstatus):
    new_shm = sorted(dev_shm_entries() - session.config.stash[_SHM_BEFORE])
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
