"""helpers.fork_hazards: the CPU twin of fork-versus-CUDA (OpenMP after fork, a lock held at fork,
Python 3.12's fork warning), asserted on any machine that has fork (the OpenMP hang: GNU libgomp)."""

from __future__ import annotations

import multiprocessing as mp
import sys
import threading

import pytest
import torch

import helpers.fork_hazards as fh
from helpers.environment import environment_report
from helpers.processes import reap
from tests.workers import METHODS

OPENMP_HAZARD = environment_report(probe_cuda=False)["openmp_runtime"] == "GNU libgomp"
needs_fork = pytest.mark.skipif("fork" not in METHODS, reason="needs the fork start method")


@pytest.fixture
def used_thread_pool():
    """This process has run a multi-threaded op, as a notebook kernel has."""
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, threads))
    fh.parallel_op()
    yield
    torch.set_num_threads(threads)


@needs_fork
@pytest.mark.skipif(not OPENMP_HAZARD, reason="the fork hang needs GNU OpenMP (torch's Linux pip wheel)")
def test_fork_child_hangs_in_the_parallel_op_and_says_where(used_thread_pool):
    report = fh.fork_hang_report("fork", threads=None, timeout=3)
    assert report.hung and not report.finished and report.exitcode is not None
    assert "in parallel_op" in report.stack and "_op_with_watchdog" in report.stack
    # Asleep, not computing. The kernel function (wchan) is a futex wait on most kernels, but some
    # report "0" there, so only the state is asserted.
    assert report.tasks and all("state S" in task for task in report.tasks), report.tasks


@pytest.mark.parametrize("method", METHODS)
def test_the_fixes_finish(method, used_thread_pool):
    threads = 1 if method == "fork" else None
    report = fh.fork_hang_report(method, threads=threads, timeout=60)
    assert report.finished and not report.hung and report.stack == "", report


def test_plot_fixes_draws_one_bar_per_report_and_hatches_the_hung_one():
    reports = [
        fh.HangReport("fork, inherited threads (hangs)", "fork", None, False, 3.0, 3.0, -15, timed_out=True),
        fh.HangReport("spawn", "spawn", None, True, 1.2, 60.0),
    ]
    bars = fh.plot_fixes(reports).axes[0].patches
    assert len(bars) == 2 and bars[0].get_hatch() == "//" and not bars[1].get_hatch()


def test_fork_hang_report_refuses_bad_input():
    with pytest.raises(ValueError, match="not available"):
        fh.fork_hang_report("teleport")
    with pytest.raises(ValueError, match="positive"):
        fh.fork_hang_report("spawn", timeout=0)


@needs_fork
def test_hang_demo_widget_callback(used_thread_pool, capsys):
    fine = fh.hang_demo(threads=1, method="fork")
    assert fine.finished and "finished in" in capsys.readouterr().out
    if OPENMP_HAZARD:
        stuck = fh.hang_demo(threads=None, method="fork", timeout=2)
        out = capsys.readouterr().out
        assert stuck.hung and "HUNG" in out and "stuck in:" in out and "parallel_op" in out


def test_hang_demo_under_spawn(capsys):
    assert fh.hang_demo(threads=None, method="spawn").finished


def _fork_take_lock(lock: threading.Lock, timeout: float) -> int | None:
    """Notebook 04 section 3's parent side: fork a take_lock child, join with a deadline."""
    child = mp.get_context("fork").Process(target=fh.take_lock, args=(lock, timeout))
    child.start()
    child.join(timeout=timeout + 30)
    (exitcode,) = reap([child], timeout=0)
    return exitcode


@needs_fork
def test_a_lock_held_by_another_thread_at_fork_stays_locked_in_the_child():
    lock, holding, release = threading.Lock(), threading.Event(), threading.Event()

    def library_thread():
        with lock:
            holding.set()
            release.wait(timeout=30)

    holder = threading.Thread(target=library_thread, daemon=True)
    holder.start()
    assert holding.wait(timeout=10)
    try:
        assert _fork_take_lock(lock, timeout=1) == 1  # held at the fork: the child can only time out
    finally:
        release.set()
        holder.join(timeout=10)
    assert lock.acquire(timeout=5)  # the parent's own lock: its holder released it
    lock.release()
    assert _fork_take_lock(lock, timeout=30) == 0  # free at the fork: taken at once


def test_take_lock_exits_1_when_it_cannot_take_the_lock():
    held = threading.Lock()
    held.acquire()
    with pytest.raises(SystemExit) as exited:
        fh.take_lock(held, timeout=0.05)
    assert exited.value.code == 1
    fh.take_lock(threading.Lock(), timeout=0.05)  # a free lock: taken, released, no exit


def test_fork_warning_from_python_3_12_shows_only_with_a_filter():
    shown = fh.fork_warning(show=True)
    hidden = fh.fork_warning(show=False)
    assert shown[-1].startswith(f"python {sys.version.split()[0]}") and "child exit code 0" in shown[-1]
    warned = [line for line in shown if "multi-threaded, use of fork() may lead to deadlocks" in line]
    if sys.version_info >= (3, 12):
        assert (
            warned and "popen_fork.py" in warned[0] and "DeprecationWarning: This process (pid=" in warned[0]
        )
    else:
        assert not warned
    assert not any("multi-threaded" in line for line in hidden), hidden


def test_parallel_op_is_deterministic():
    assert fh.parallel_op(10_000, threads=1) == fh.parallel_op(10_000, threads=1)
