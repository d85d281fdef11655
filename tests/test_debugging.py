"""Tests for helpers.debugging (notebook 08): hangs, exit codes, leftovers, oversubscription, logs."""

from __future__ import annotations

import logging
import os
import signal

import pytest

import helpers.debugging as dbg
from helpers.processes import live_children, run_with_deadline
from tests.workers import METHODS


@pytest.mark.parametrize("method", METHODS)
def test_watchdog_dumps_the_stuck_stack(method):
    hung = run_with_deadline(dbg.stuck_with_watchdog, kwargs={"dump_after": 0.5}, method=method, timeout=20)
    assert hung.timed_out
    if method != "forkserver":  # a forkserver child writes where the server's output goes
        assert "in take_lock_twice" in hung.output


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dump_on_signal(method):
    if method not in METHODS:
        pytest.skip(f"{method} not available")
    dump = dbg.dump_stuck_child("signal", method=method)
    assert dump.ok and "take_lock_twice" in dump.text
    assert live_children() == []


def test_py_spy_dump_or_reason():
    dump = dbg.dump_stuck_child("py-spy", method="spawn")
    if dbg.py_spy_path() is None:
        assert not dump.ok and "not installed" in dump.text
    elif dump.ok:
        assert "take_lock_twice" in dump.text
    else:
        assert dump.text  # not permitted here: the reason is given
    with pytest.raises(ValueError):
        dbg.dump_stuck_child("gdb")


EXPECTED = {
    "returns": 0,
    "sys.exit(3)": 3,
    "raises": 1,
    "os._exit(7)": 7,
    "segfault": -signal.SIGSEGV,
    "SIGTERM": -signal.SIGTERM,
    "SIGKILL": -signal.SIGKILL,
}


@pytest.mark.parametrize("case", dbg.EXIT_CASES)
def test_exit_codes_under_fork_or_spawn(case):
    method = "fork" if "fork" in METHODS else "spawn"
    assert dbg.what_the_parent_sees(case, method=method).exitcode == EXPECTED[case]


def test_exit_codes_under_spawn_and_widget(capsys):
    assert dbg.what_the_parent_sees("raises", method="spawn").exitcode == 1
    assert dbg.explain_exit("SIGKILL", method="spawn") == -9
    assert "OOM" in capsys.readouterr().out
    with pytest.raises(ValueError):
        dbg.what_the_parent_sees("explodes")
    with pytest.raises(ValueError):
        dbg.exit_by("explodes")


def test_zombie_is_visible_until_joined():
    import multiprocessing as mp

    ctx = mp.get_context(METHODS[0])
    child = ctx.Process(target=dbg.sleep_for, args=(0,))
    child.start()
    assert dbg.wait_for_status(child.pid, "zombie", timeout=30) == "zombie"
    child.join(5)
    assert dbg.wait_for_status(child.pid, "zombie", timeout=0) == "gone"


@pytest.mark.parametrize("method", METHODS)
def test_daemon_cannot_have_children(method):
    assert dbg.daemon_child_error(method).endswith("daemonic processes are not allowed to have children")


def test_orphan_demo_finds_and_cleans_up():
    demo = dbg.orphan_demo()
    assert demo["script_exitcode"] == -9 and demo["orphan_alive"] and demo["found_by_scan"]
    assert demo["cleaned_up"] and demo["orphan_parent"] != os.getpid()
    assert dbg.find_processes("no-such-marker-9a8b7c") == []


def test_oversubscription_grid_shape():
    grid = dbg.oversubscription_grid(processes=(1, 2), threads=(1,), reps=2, size=32)
    assert list(grid) == [(1, 1), (2, 1)] and all(rate > 0 for rate in grid.values())
    assert dbg.matmul_work(0, threads=1, reps=1, size=8, start_at=0) > 0


@pytest.mark.parametrize("method", METHODS)
def test_logs_arrive_with_process_names(method):
    records = dbg.collect_child_logs(2, method=method)
    assert [name for name, _ in records] == ["log_from_child-0"] * 2 + ["log_from_child-1"] * 2
    assert ("log_from_child-1", "rank 1 done") in records


def test_list_handler_and_log_from_child():
    import queue

    handler = dbg.ListHandler()
    handler.handle(logging.makeLogRecord({"msg": "x"}))
    assert handler.records[0].getMessage() == "x"
    q = queue.Queue()
    assert dbg.log_from_child(3, q) == 3 and q.qsize() == 2
