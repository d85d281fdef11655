"""Leak checks for the whole suite, and the forced default start method.

- Every test fails if it leaves a child process behind (under pytest-xdist each worker checks its own).
- Every session fails if /dev/shm gained an entry that no live process holds (one held is in use: by
  a stage running beside it, or by a child the first check reports). Under xdist the check must see every worker's
  tests finished and no worker exited yet: a worker's exit lets its resource tracker unlink what it
  leaked, so a check after the run (``tools/clean_check.py``) would miss a leaked
  ``SharedMemory``. Each worker waits at its end until all have finished their tests, then compares
  /dev/shm with the controller's snapshot from before any worker started
  (``tests/test_suite_checks.py`` shows both checks failing a run under xdist).
- ``MP_DEFAULT_START_METHOD=spawn`` (or ``forkserver``) makes that the test process's default start
  method, as on macOS/Windows (spawn) or Linux with Python 3.14+ (forkserver); notebook kernels get
  it from the kernelspecs in ``jupyter-config/kernels`` (``make test-spawn``).
- SIGHUP is back to its default in each test process: a suite started under ``nohup`` would pass
  SIG_IGN to every child, kernels included, and the hang-up demos of notebook 14 would see none.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from helpers.launch import FAST_METHOD
from helpers.processes import dev_shm_entries, held_dev_shm_entries, live_children

# A process has one forkserver, started with its first forkserver child. Here it imports torch, and
# the torch._dynamo that a child's first optimizer imports, once per test process, so its children
# start with them (otherwise about 1.4 CPU-s each, 2.4 with an optimizer). The notebooks, whose
# kernels are not test processes, keep the plain forkserver that notebook 01 measures.
FORKSERVER_PRELOAD = ["__main__", "torch", "torch._dynamo"]
# pytest-timeout's default (pyproject.toml) suits a unit test; a notebook is one test item made of
# many cells (each also bounded by nbmake's per-cell timeout), so it gets a whole-notebook limit.
NOTEBOOK_TIMEOUT = 900
# The forced start-method stages (`make test-spawn`, `make test-forkserver`) run only the tests marked
# `default_start_method` or `spawn_variant`. With --forced-files-only they import only the test files
# that can hold one (this pattern: the marker's name, or a parameter named `method`), not all of
# tests/ (each xdist worker imports every file it collects: about 13 CPU-s for all of them). Every
# session checks that no such test lives in a file the pattern misses (pytest_collection_modifyitems).
FORCED_FILE = re.compile(r"default_start_method|parametrize\(\s*['\"][^'\"]*\bmethod\b|def method\(")
# Under `--dist loadscope --no-loadscope-reorder` a worker that is free takes the next module in
# collection order. These hold a worker longest (wall seconds on one worker of `make test`, from
# `python -m tools.timeline`, 2026-12-03: 629, 605, 461, 430, 168, 137, 118, 118, 100, 97, 73, 72, 67,
# 66, 52, 51, 49, 48), so they go first, longest first, and the short modules fill the end: in
# alphabetical order test_sharding and test_upstream came last and one worker ran alone for 35 s.
LONG_FIRST = (
    "tests/e2e/test_jupyterlab_browser.py",
    "tests/e2e/test_jupyterlab_browser_odd.py",
    "tests/test_catalog.py",
    "tests/test_checkers.py",
    "tests/test_patterns.py",
    "tests/test_ddp.py",
    "tests/test_sharding.py",
    "tests/test_multinode.py",
    "tests/test_launch.py",
    "tests/test_data.py",
    "tests/test_doctor_cli.py",
    "tests/test_coursework.py",
    "tests/test_doctor_target.py",
    "tests/test_cuda.py",
    "tests/test_doctor_machine.py",
    "tests/test_start_methods.py",
    "tests/test_doctor_process.py",
    "tests/test_upstream.py",
)


@functools.cache
def holds_forced_tests(path: Path) -> bool:
    """Whether a test file can hold a test of the forced stages (``FORCED_FILE`` matches its text)."""
    return FORCED_FILE.search(path.read_text(encoding="utf-8")) is not None


def pytest_addoption(parser):
    parser.addoption(
        "--forced-files-only",
        action="store_true",
        help="collect only the test files that can hold default_start_method or spawn_variant tests",
    )


def pytest_ignore_collect(collection_path, config):
    test_file = collection_path.suffix == ".py" and collection_path.name.startswith("test_")
    if config.getoption("forced_files_only") and test_file and not holds_forced_tests(collection_path):
        return True
    return None


def pytest_configure(config):
    multiprocessing.set_forkserver_preload(FORKSERVER_PRELOAD)
    if hasattr(signal, "SIGHUP"):  # POSIX
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    method = os.environ.get("MP_DEFAULT_START_METHOD", "").strip()
    if method:
        multiprocessing.set_start_method(method, force=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``PYTEST_TIMELINE=FILE``: one line per test, appended to FILE (every xdist worker writes
    its own): worker, start and end (wall seconds since the epoch), CPU seconds of the test process
    and of its waited-for children, the test's id. ``python -m tools.timeline FILE`` reads it."""
    path = os.environ.get("PYTEST_TIMELINE")
    if not path:
        return (yield)
    import resource

    def cpu() -> tuple[float, float]:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime

    start, (own, children) = time.time(), cpu()
    try:
        return (yield)
    finally:
        end, (own_end, children_end) = time.time(), cpu()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(path, "a") as log:
            log.write(
                f"{worker}\t{start:.2f}\t{end:.2f}\t{own_end - own:.2f}\t{children_end - children:.2f}\t{item.nodeid}\n"
            )


def pytest_runtest_logreport(report):
    """Keep why a test was rerun (RERUN in the Makefile): ``-rR`` names it, and the summary says why."""
    if report.outcome == "rerun" and report.longrepr is not None:
        lines = [line for line in str(report.longrepr).splitlines() if line.startswith("E ")]
        _RERUN_REASONS.append((report.nodeid, (lines or ["(no error line)"])[0][:300]))


def pytest_terminal_summary(terminalreporter):
    for nodeid, reason in _RERUN_REASONS:
        terminalreporter.write_line(f"RERUN REASON {nodeid}: {reason}")


_RERUN_REASONS: list[tuple[str, str]] = []


def pytest_report_header(config):
    method = multiprocessing.get_start_method()
    return f"default start method: {method} (MP_DEFAULT_START_METHOD to force one)"


def pytest_collection_modifyitems(items):
    rank = {module: i for i, module in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest in order
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.timeout(NOTEBOOK_TIMEOUT))
            item.add_marker(pytest.mark.notebook)
        # A unit test's run under spawn where this platform's fast method is another: the macOS
        # learner's choice, which `make test-spawn` runs (docs/testing.md); `make test` runs the rest.
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("method") == "spawn" and FAST_METHOD != "spawn":
            item.add_marker(pytest.mark.spawn_variant)
        forced = item.get_closest_marker("default_start_method") or "method" in params
        if forced and item.path.suffix == ".py" and not holds_forced_tests(item.path):
            raise pytest.UsageError(
                f"{item.nodeid}: conftest.FORCED_FILE misses its file (--forced-files-only)"
            )


# pid -> whether its descendants are exempt too: processes a module-scoped fixture keeps for the
# module's tests (tests/e2e: one JupyterLab server, one Chromium). Gone before the next module.
_LONG_LIVED: dict[int, bool] = {}


@pytest.fixture(scope="session")
def long_lived_processes():
    """Register a process a module-scoped fixture keeps alive across its tests, so the per-test leak
    check passes over it: ``long_lived_processes[pid] = with_descendants``. Delete it when it stops."""
    return _LONG_LIVED


def _long_lived(child) -> bool:
    try:
        return child.pid in _LONG_LIVED or any(_LONG_LIVED.get(p.pid) for p in child.parents())
    except psutil.Error:
        return False


def _cmdline(child) -> str:
    """Its command line, or "" when it exited since it was listed (Chromium's helpers at teardown)."""
    try:
        return " ".join(child.cmdline())[:200] or f"({child.name()})"
    except psutil.Error:
        return ""


def leftover_children(grace: float = 5.0) -> list[str]:
    """Children (multiprocessing's infrastructure and long-lived fixture processes aside) still alive
    after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while True:
        left = [
            f"pid {c.pid}: {line}" for c in live_children() if not _long_lived(c) and (line := _cmdline(c))
        ]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


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
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: the controller's snapshot, from before it
        config.stash[_SHM_BEFORE] = set(config.workerinput[_KEY]["shm_before"])
        return
    config.stash[_SHM_BEFORE] = dev_shm_entries()
    config.stash[_PROBLEMS] = set()
    if config.pluginmanager.getplugin("dsession") is not None:  # the xdist controller
        config.stash[_BARRIER] = Path(tempfile.mkdtemp(prefix="pytest-workers-done-"))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller: hand every worker the /dev/shm snapshot and the directory of the barrier."""
    stash = node.config.stash
    node.workerinput[_KEY] = {"shm_before": sorted(stash[_SHM_BEFORE]), "barrier": str(stash[_BARRIER])}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    node.config.stash[_PROBLEMS].update(node.workeroutput.get(_KEY, []))


def _wait_for_the_other_workers(barrier: Path, timeout: float = 3600.0) -> None:
    """Return once every live worker (the controller's other children) has finished its tests."""
    (barrier / str(os.getpid())).touch()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = {int(p.name) for p in barrier.iterdir()}
        workers = set()
        for child in psutil.Process(os.getppid()).children():
            try:
                if child.status() != psutil.STATUS_ZOMBIE:
                    workers.add(child.pid)
            except psutil.NoSuchProcess:
                pass
        if workers <= done:
            return
        time.sleep(0.2)


def _leaked_shm(before: set[str], grace: float = 5.0) -> list[str]:
    """New /dev/shm entries (not ``sem.*``) that no live process holds, still so after ``grace`` s (an
    entry between its last close and its unlink, in a stage running beside this one, is not leaked)."""
    deadline = time.monotonic() + grace
    while True:
        new = {n for n in dev_shm_entries() - before if not n.startswith("sem.")}
        leaked = sorted(new - held_dev_shm_entries()) if new else []
        if not leaked or time.monotonic() > deadline:
            return leaked
        time.sleep(0.5)


@pytest.hookimpl(trylast=True)  # on the xdist controller: after the workers are shut down
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and config.option.markexpr:
        session.exitstatus = pytest.ExitCode.OK  # the forced runs select by marker
    if hasattr(config, "workerinput"):
        _wait_for_the_other_workers(Path(config.workerinput[_KEY]["barrier"]))
    problems = set()
    # Named semaphores (sem.*) of children killed at a deadline under spawn/forkserver are unlinked by
    # multiprocessing's resource tracker when the test process exits: tools/clean_check.py checks
    # them afterwards. Every other new entry that no live process holds is leaked. One that a process
    # holds is in use: by a stage running beside this one (.ci/run), or by a child of this session,
    # which the check below reports; tools/clean_check.py, after the stage, counts every new entry.
    if leaked := _leaked_shm(config.stash[_SHM_BEFORE]):
        problems.add(f"new /dev/shm entries after the run, held by no process: {leaked}")
    if left := leftover_children():
        who = f"xdist worker {config.workerinput['workerid']}" if hasattr(config, "workerinput") else "pytest"
        problems.add(f"child processes still alive after the run ({who}): {left}")
    if hasattr(config, "workeroutput"):
        config.workeroutput[_KEY] = sorted(problems)  # the controller reports them
        return
    problems |= config.stash[_PROBLEMS]
    if _BARRIER in config.stash:
        shutil.rmtree(config.stash[_BARRIER], ignore_errors=True)
    if problems:
        print("\nLEAK CHECK FAILED:\n  " + "\n  ".join(sorted(problems)))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_SHM_BEFORE = pytest.StashKey[set]()
_PROBLEMS = pytest.StashKey[set]()
_BARRIER = pytest.StashKey[Path]()
_KEY = "leak_check"
