"""Which tests depend on the default start method: measured in every plain run, so that the runs with
a forced default (``make test-spawn``, ``make test-forkserver``) repeat only those.

Most tests pass a start method explicitly (``get_context("spawn")``, parametrized over fork, spawn
and forkserver); forcing another default changes nothing for them. A test depends on the default
when it, or anything it calls (helpers, torch's DataLoader, a forked child of it), reads
multiprocessing's default context: ``mp.Process``, ``mp.Queue()``, ``mp.get_context()``,
``mp.get_start_method()``, a ``DataLoader`` without ``multiprocessing_context``... or when it starts
an IPython kernel (the forced runs set the kernel's default through an IPython start-up file).

In a plain run (``MP_DEFAULT_START_METHOD`` unset) this plugin sees both:

- multiprocessing's default context object gets a subclass whose ``_actual_context`` (the one
  attribute every default read goes through, bound methods such as ``multiprocessing.Queue``
  included) records the running test; forked children inherit it and append to a file;
- ``IPYTHONDIR`` points at a fresh directory whose start-up file appends ``$PYTEST_CURRENT_TEST``:
  every kernel the test starts, directly or through a script, reports itself.

It stores {"seen": [...], "used": [...]} in pytest's cache (``.pytest_cache``, key :data:`CACHE_KEY`;
under pytest-xdist the workers send theirs to the controller). ``--default-dependent-only`` (the
forced runs) then keeps every notebook, every test that used the default, every test marked
``default_start_method``, and every test the cache has not seen yet (new tests run until measured);
with no cache at all (a fresh clone) it keeps everything.
"""

from __future__ import annotations

import multiprocessing.context as mp_context
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

CACHE_KEY = "torch-mp/default-start-method"
OPTION = "--default-dependent-only"
MARKER = "default_start_method"

_state: dict = {"current": None, "pid": None, "used": set(), "log": None}


def _record(caller) -> None:
    test = _state["current"]
    if test is None:
        return
    # A spawn/forkserver child is told its parent's default (spawn.get_preparation_data): that read
    # happens for every child of every method, so it says nothing about the test.
    if caller.f_code.co_name == "get_preparation_data":
        return
    if os.getpid() == _state["pid"]:
        _state["used"].add(test)
    else:  # a forked child: the parent's set is out of reach, the file is not
        with open(_state["log"], "a") as log:
            log.write(test + "\n")


class _ProbedDefaultContext(mp_context.DefaultContext):
    """multiprocessing's default context, recording each read of the default."""

    @property
    def _actual_context(self):
        _record(sys._getframe(2))  # 0: here, 1: get_context/get_start_method, 2: their caller
        return self.__dict__["_actual_context"]

    @_actual_context.setter
    def _actual_context(self, value):
        self.__dict__["_actual_context"] = value


KERNEL_STARTUP = """\
# Written by tests/start_method_probe.py: report which test started this kernel.
import os

with open({log!r}, "a") as _log:
    _log.write(os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0] + "\\n")
del _log
"""


def pytest_addoption(parser):
    parser.addoption(
        OPTION,
        action="store_true",
        help="with MP_DEFAULT_START_METHOD set: run only the notebooks and the tests that the last "
        "plain run found using the default start method (tests/start_method_probe.py)",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}: depends on the default start method in a way the probe cannot see (re-run by {OPTION})",
    )
    if os.environ.get("MP_DEFAULT_START_METHOD", "").strip():
        return  # a forced run: nothing to measure
    workdir = Path(tempfile.mkdtemp(prefix="start-method-probe-"))
    log = workdir / "used.txt"
    log.touch()
    startup = workdir / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-start-method-probe.py").write_text(KERNEL_STARTUP.format(log=str(log)))
    _state.update(pid=os.getpid(), log=str(log), workdir=workdir, ipythondir=os.environ.get("IPYTHONDIR"))
    os.environ["IPYTHONDIR"] = str(workdir / "ipython")
    mp_context._default_context.__class__ = _ProbedDefaultContext


def pytest_unconfigure(config):
    if "workdir" not in _state:
        return
    mp_context._default_context.__class__ = mp_context.DefaultContext
    if _state["ipythondir"] is None:
        os.environ.pop("IPYTHONDIR", None)
    else:
        os.environ["IPYTHONDIR"] = _state["ipythondir"]
    shutil.rmtree(_state.pop("workdir"), ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _state["current"] = item.nodeid
    try:
        yield
    finally:
        _state["current"] = None


def _used_here() -> set[str]:
    logged = Path(_state["log"]).read_text().split() if _state["log"] else []
    return _state["used"] | {line for line in logged if line}


_seen = pytest.StashKey[set]()
_used = pytest.StashKey[set]()


def pytest_runtest_logreport(report):
    if report.when == "setup":
        _state.setdefault("seen", set()).add(report.nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist, on the controller: a worker's findings."""
    _state.setdefault("worker_used", set()).update(node.workeroutput.get(CACHE_KEY, []))


def pytest_sessionfinish(session):
    config = session.config
    if "workdir" not in _state:
        return
    used = _used_here()
    if hasattr(config, "workeroutput"):  # an xdist worker: the controller stores it
        config.workeroutput[CACHE_KEY] = sorted(used)
        return
    seen = _state.get("seen", set())
    cache = getattr(config, "cache", None)
    if cache is None or not seen:
        return
    used |= _state.get("worker_used", set())
    old = cache.get(CACHE_KEY, {"seen": [], "used": []})
    cache.set(
        CACHE_KEY,
        {
            "seen": sorted(set(old["seen"]) | seen),
            "used": sorted((set(old["used"]) - seen) | (used & seen)),
        },
    )


def dependent(item, measured: dict) -> bool:
    """Whether ``item`` must run again under a forced default, given the cache's ``measured``."""
    return (
        item.path.suffix == ".ipynb"
        or item.get_closest_marker(MARKER) is not None
        or item.nodeid in measured["used"]
        or item.nodeid not in measured["seen"]
    )


def _measured(config) -> dict | None:
    cache = getattr(config, "cache", None)
    return cache.get(CACHE_KEY, None) if cache is not None else None


def pytest_collection_modifyitems(config, items):
    if not config.getoption(OPTION):
        return
    if not os.environ.get("MP_DEFAULT_START_METHOD", "").strip():
        raise pytest.UsageError(f"{OPTION} needs MP_DEFAULT_START_METHOD (spawn or forkserver)")
    measured = _measured(config)
    if measured is None:
        return
    dropped = [item for item in items if not dependent(item, measured)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if dependent(item, measured)]


def pytest_report_header(config):
    if not config.getoption(OPTION):
        return None
    measured = _measured(config)
    if measured is None:
        return f"{OPTION}: no measurement in .pytest_cache yet (run `make test` first): running everything"
    return (
        f"{OPTION}: every notebook, {len(measured['used'])} tests measured using the default start "
        f"method in the last plain run (of {len(measured['seen'])}), and any test not measured yet"
    )
