"""helpers.start_methods and helpers.torch_worker: the workers and measurements behind notebook 01."""

from __future__ import annotations

import os
import sys

import pytest
import torch.multiprocessing as tmp

import helpers.start_methods as sm
import helpers.torch_worker as tw
from helpers.launch import spawn_with_deadline
from helpers.processes import reap, run_python_script
from tests.workers import FRESH, METHODS


def _run_in_child(method, target, *args):
    """The plain pattern of notebook 01: Process, start, get, join; the result and the exit code."""
    ctx = tmp.get_context(method)
    results = ctx.Queue()
    child = ctx.Process(target=target, args=(0, *args, results))
    child.start()
    try:
        return results.get(timeout=60), child
    finally:
        reap([child], timeout=30)


@pytest.mark.parametrize("method", METHODS)
def test_whoami_reports_the_childs_identity(method):
    info, child = _run_in_child(method, sm.whoami)
    assert child.exitcode == 0 and info["pid"] == child.pid and info["rank"] == 0
    assert (info["ppid"] == os.getpid()) == (method != "forkserver")  # the server forks its children


@pytest.mark.parametrize("method", METHODS)
def test_what_a_child_inherits_depends_on_the_start_method(method, monkeypatch, tmp_path):
    # Start this process's forkserver before the variable is set, as notebook 01 section 4 does.
    if method == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
    monkeypatch.setitem(sm.STATE, "value", "changed after import")
    monkeypatch.setenv("LESSON_VAR", "set late")
    with open(tmp_path / "data", "w+b") as data:
        data.write(b"0123456789")
        data.seek(0)
        fd = os.dup2(data.fileno(), 99)  # a number no fresh child has open (a low one may be reused)
        try:
            seen, _ = _run_in_child(method, sm.what_i_inherit, fd)
        finally:
            os.close(fd)
        offset = data.tell()
    forked = method == "fork"
    assert seen["STATE"] == ("changed after import" if forked else "set at import")
    assert seen["LESSON_VAR"] == (None if method == "forkserver" else "set late")
    assert seen["read from fd"] == "01234" if forked else seen["read from fd"].startswith("OSError")
    assert offset == (5 if forked else 0)


def test_fail_on_rank_raises_and_the_others_are_terminated():
    with pytest.raises(tmp.ProcessRaisedException, match="rank 1 failed on purpose"):
        spawn_with_deadline(sm.fail_on_rank, args=(1,), nprocs=2, method=FRESH, timeout=60)


def test_report_rank_puts_rank_and_pid():
    queue = tmp.get_context(FRESH).Queue()
    spawn_with_deadline(sm.report_rank, args=(queue,), nprocs=2, method=FRESH)
    assert sorted(rank for rank, _ in (queue.get(timeout=30), queue.get(timeout=30))) == [0, 1]


@pytest.mark.parametrize("method", [*METHODS, "forkserver+preload"])
def test_startup_latencies_one_per_child(method):
    if method.split("+")[0] not in METHODS:
        pytest.skip(f"{method} is not available here")
    latencies = tw.startup_latencies(method, nprocs=2)
    assert len(latencies) == 2 and all(0 < s < 60 for s in latencies)


@pytest.mark.skipif("fork" not in METHODS, reason="needs fork")
def test_fork_starts_at_least_3x_faster_than_spawn():
    # A robust, large effect: fork copies a running process, spawn starts Python and imports torch.
    fork = max(tw.startup_latencies("fork", nprocs=1))
    spawn = min(tw.startup_latencies("spawn", nprocs=1))
    assert spawn > 3 * fork


def test_startup_latencies_rejects_unknown_methods():
    with pytest.raises(ValueError, match="must be one of"):
        tw.startup_latencies("threads")


@pytest.mark.parametrize("method", [m for m in METHODS if m != "fork"])
def test_guard_script_without_guard_fails_in_the_child_and_with_guard_works(method):
    # A spawn child re-runs an unguarded script's top level (multiprocessing.spawn.prepare). So does
    # each forkserver child up to Python 3.13.7; from 3.13.8/3.14 (gh-126631) the forkserver server
    # imports the script once and fails there, and the parent's start() raises. 3.15's server ignores
    # that failure (set_forkserver_preload's new on_error="ignore"), and each child fails again.
    unguarded = run_python_script(sm.guard_script(guarded=False, method=method), timeout=60)
    assert "bootstrapping phase" in unguarded.stderr
    if method == "forkserver" and (3, 13, 8) <= sys.version_info < (3, 15):
        assert unguarded.returncode == 1 and unguarded.stdout == ""
    else:
        assert "parent: child exit code 1" in unguarded.stdout
    guarded = run_python_script(sm.guard_script(guarded=True, method=method), timeout=60)
    assert guarded.stdout.splitlines() == ["child: work() ran", "parent: child exit code 0"]


@pytest.mark.skipif(
    "forkserver" not in METHODS or sys.version_info < (3, 15), reason="on_error is new in Python 3.15"
)
def test_a_failed_preload_raises_in_the_parent_with_on_error_fail_from_python_315():
    # Notebook 01's forkserver appendix: on 3.15, on_error="fail" brings back 3.14's error at start().
    ctx_line = "ctx = mp.get_context('forkserver')\n"
    script = sm.guard_script(guarded=False, method="forkserver")
    fail = 'ctx.set_forkserver_preload(["__main__"], on_error="fail")\n'
    strict = script.replace(ctx_line, ctx_line + fail)
    assert strict != script
    done = run_python_script(strict, timeout=60)
    assert done.returncode == 1 and done.stdout == "", done
    assert "bootstrapping phase" in done.stderr and "ConnectionResetError" in done.stderr


def test_set_start_method_twice_raises_and_get_context_does_not():
    done = run_python_script(sm.SET_START_METHOD_TWICE)
    assert "second call: RuntimeError: context has already been set" in done.stdout
    assert "get_context: ok, method = spawn" in done.stdout
    assert "force=True: ok, method = spawn" in done.stdout


@pytest.mark.parametrize("method", METHODS)
def test_work_exits_0_and_fail_on_rank_exits_1_under_the_plain_pattern(method):
    ctx = tmp.get_context(method)
    procs = [ctx.Process(target=tw.work, args=(0,)), ctx.Process(target=sm.fail_on_rank, args=(1, 1))]
    for p in procs:
        p.start()
    reap(procs, timeout=60)
    assert [p.exitcode for p in procs] == [0, 1]


def test_square_in_a_spawn_pool():
    with tmp.get_context("spawn").Pool(processes=2) as pool:
        assert pool.map_async(sm.square, range(4)).get(timeout=120) == [0, 1, 4, 9]
