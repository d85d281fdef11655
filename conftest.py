"""Leak checks for the whole suite: no child process survives a test, no /dev/shm entry the run.

Under pytest-xdist (``make test`` runs on both cores) each worker checks its own children after every
test and at its end, and the /dev/shm check stays whole-run and exact: every worker waits at its end
until all workers have finished their tests (so no test is in flight anywhere), then compares
/dev/shm with the controller's snapshot from before any worker started, before any worker exits
(a worker's exit lets its resource tracker unlink what it leaked). The controller reports what the
workers found, and checks its own children and /dev/shm once more after they are gone.

Also the portability switch: with ``MP_DEFAULT_START_METHOD=spawn`` (or ``forkserver``) the test
process and every notebook kernel nbmake starts run with that default start method, as on macOS /
Windows (spawn) or Linux with Python 3.14+ (forkserver). See ``tests/portability.py``.
"""

from __future__ import annotations

import contextlib
import inspect
import multiprocessing
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from helpers.environment import default_start_method
from helpers.processes import dev_shm_entries, live_children
from tests.kernel_client import late_replies, poll_in_slices
from tests.portability import apply_forced_start_method, make_ipython_dir

# Which tests depend on the default start method (measured; `make test-spawn` repeats only those);
# the browser test's screenshots and summary lines; longest work first under xdist.
pytest_plugins = ["tests.start_method_probe", "tests.e2e.report", "tests.scheduling"]

# A process has one forkserver, started with its first forkserver child. Here it imports torch, and
# the torch._dynamo that a child's first optimizer imports, once per test process, so its children
# start with them (otherwise about 1.4 CPU-s each, 2.4 with an optimizer). They import their own
# modules and unpickle their target and arguments as any forkserver child does. The notebooks,
# whose kernels are not test processes, keep the plain forkserver that notebook 01 measures.
FORKSERVER_PRELOAD = ["__main__", "torch", "torch._dynamo"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: asserts on measured time; `make test` runs it apart, after the parallel session"
    )
    config.addinivalue_line(
        "markers", "hang_check: its time bound, many times its duration, only proves it ends: not serial"
    )
    multiprocessing.set_forkserver_preload(FORKSERVER_PRELOAD)
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
    """Children (multiprocessing's infrastructure and long-lived fixture processes aside) still alive
    after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while True:
        left = [f"pid {c.pid}: {' '.join(c.cmdline())[:200]}" for c in live_children() if not _long_lived(c)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


# pid -> whether its descendants are exempt too: processes a module-scoped fixture keeps for the
# module's tests (tests/e2e: one JupyterLab server, one Chromium). Gone before the next module.
_LONG_LIVED: dict[int, bool] = {}


def _long_lived(child) -> bool:
    import psutil

    if child.pid in _LONG_LIVED:
        return True
    try:
        return any(_LONG_LIVED.get(parent.pid) for parent in child.parents())
    except psutil.Error:
        return False


@pytest.fixture(scope="session")
def long_lived_processes():
    """Register a process a module-scoped fixture keeps alive across its tests, so the per-test leak
    check passes over it: ``long_lived_processes[pid] = with_descendants``. Delete it when it stops."""
    return _LONG_LIVED


# pytest-timeout's default (pyproject.toml) suits a unit test; a notebook is one test item made of
# many cells (each also bounded by nbmake's per-cell timeout), so it gets a whole-notebook limit.
NOTEBOOK_TIMEOUT = 900


# Tests that assert an upper bound on a measured duration (load only ever makes things slower), or a
# lower bound on a speed-up, run on their own after the parallel session (`make test`, marker
# `serial`): a neighbour on the same core must not decide them. The rule reads their source, so new
# ones join without a list; `@pytest.mark.serial` adds any it misses. A bound is the comparison
# that follows the timing word within one clause (`wall > 0 and 0 <= accuracy` bounds nothing).
# A test whose bound is many times what it takes, there only to prove that it ends instead of
# hanging (`< 30` for a kill that takes a second, against a 60 s sleep), says so with
# `@pytest.mark.hang_check` and runs in the parallel session: no neighbour decides that.
TIMED_ASSERT = re.compile(
    r"^\s*assert\b[^\n]*(\b(seconds|elapsed|median|wall)\b|monotonic\(\)|perf_counter\(\))"
    r"(?:(?!\b(?:and|or)\b)[^\n])*<"
    r"|^\s*assert\b[^\n]*\b(speedup|ratio)\w*\b(?:(?!\b(?:and|or)\b)[^\n])*>",
    re.M,
)


def measures_time(item) -> bool:
    function = getattr(item, "function", None)
    if function is None or item.get_closest_marker("hang_check"):  # doctests, notebooks; see above
        return False
    try:
        return bool(TIMED_ASSERT.search(inspect.getsource(function)))
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid.endswith(".ipynb") or ".ipynb::" in item.nodeid:
            item.add_marker(pytest.mark.timeout(NOTEBOOK_TIMEOUT))
        if item.get_closest_marker("serial") is None and measures_time(item):
            item.add_marker(pytest.mark.serial)


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


def _new_shm(before: set[str]) -> list[str]:
    # Named semaphores (sem.*) of children killed at a deadline under spawn/forkserver are unlinked by
    # multiprocessing's resource tracker when the test process exits: `make test` checks them
    # afterwards (scripts/clean_check.py). Everything else must be gone at the end of the session.
    return sorted(n for n in dev_shm_entries() - before if not n.startswith("sem."))


def pytest_sessionstart(session):
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: the controller's snapshot, from before it
        config.stash[_SHM_BEFORE] = set(config.workerinput[_WORKER_INPUT]["shm_before"])
        return
    config.stash[_SHM_BEFORE] = dev_shm_entries()
    config.stash[_PROBLEMS] = set()
    if config.pluginmanager.getplugin("dsession") is not None:  # the xdist controller
        config.stash[_BARRIER] = Path(tempfile.mkdtemp(prefix="pytest-workers-done-"))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller: hand every worker the /dev/shm snapshot and the directory of the barrier."""
    config = node.config
    node.workerinput[_WORKER_INPUT] = {
        "shm_before": sorted(config.stash[_SHM_BEFORE]),
        "barrier": str(config.stash[_BARRIER]),
    }


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    node.config.stash[_PROBLEMS].update(node.workeroutput.get(_WORKER_INPUT, []))


def _wait_for_the_other_workers(barrier: Path, timeout: float = 3600.0) -> None:
    """Return once every live worker (the controller's other children) has finished its tests."""
    import psutil

    (barrier / str(os.getpid())).touch()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = {int(p.name) for p in barrier.iterdir()}
        workers = set()
        for child in psutil.Process(os.getppid()).children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if child.status() != psutil.STATUS_ZOMBIE:
                    workers.add(child.pid)
        if workers <= done:
            return
        time.sleep(0.2)


@pytest.hookimpl(trylast=True)  # on the xdist controller: after the workers are shut down
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and _may_select_nothing(config):
        session.exitstatus = pytest.ExitCode.OK
    if hasattr(config, "workerinput"):
        _wait_for_the_other_workers(Path(config.workerinput[_WORKER_INPUT]["barrier"]))
    problems = set()
    new_shm = _new_shm(config.stash[_SHM_BEFORE])
    if new_shm:
        problems.add(f"new /dev/shm entries after the run: {new_shm}")
    left = leftover_children()
    if left:
        problems.add(f"child processes still alive after the run ({_who(config)}): {left}")
    if hasattr(config, "workeroutput"):
        config.workeroutput[_WORKER_INPUT] = sorted(problems)  # the controller reports them
        return
    problems |= config.stash[_PROBLEMS]
    if _BARRIER in config.stash:
        shutil.rmtree(config.stash[_BARRIER], ignore_errors=True)
    if problems:
        print("\nLEAK CHECK FAILED:\n  " + "\n  ".join(sorted(problems)))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _may_select_nothing(config) -> bool:
    """`make test`'s serial stage and the forced-default runs select by rule: none selected is a result."""
    return "serial" in (config.option.markexpr or "") or config.getoption("--default-dependent-only")


def _who(config) -> str:
    return f"xdist worker {config.workerinput['workerid']}" if hasattr(config, "workerinput") else "pytest"


_SHM_BEFORE = pytest.StashKey[set]()
_PROBLEMS = pytest.StashKey[set]()
_BARRIER = pytest.StashKey[Path]()
_WORKER_INPUT = "leak_check"
_IPYTHON_DIR = pytest.StashKey[tuple]()
