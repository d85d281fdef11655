"""helpers.start_methods: the workers and measurements behind notebook 01."""

from __future__ import annotations

import pytest
import torch.multiprocessing as tmp

import helpers.start_methods as sm
from helpers.launch import launch, spawn_with_deadline
from helpers.processes import run_python_script, run_with_deadline
from tests.workers import METHODS


@pytest.mark.parametrize("method", METHODS)
def test_whoami_reports_the_childs_identity(method):
    infos = launch(sm.whoami, nprocs=2, method=method)
    assert [i["rank"] for i in infos] == [0, 1]
    assert len({i["pid"] for i in infos}) == 2


@pytest.mark.parametrize("method", METHODS)
def test_state_changed_after_import_reaches_fork_children_only(method, monkeypatch):
    monkeypatch.setitem(sm.STATE, "value", "changed after import")
    (seen,) = launch(sm.read_state, nprocs=1, method=method)
    assert seen == ("changed after import" if method == "fork" else "set at import")


@pytest.mark.parametrize("method", METHODS)
def test_parallel_op_with_one_thread_finishes_in_any_child(method):
    result = run_with_deadline(sm.parallel_op, kwargs={"threads": 1}, method=method, timeout=60)
    assert result.ok


def test_parallel_op_is_deterministic():
    assert sm.parallel_op(10_000, threads=1) == sm.parallel_op(10_000, threads=1)


def test_fail_on_rank_raises_and_the_others_are_terminated():
    with pytest.raises(tmp.ProcessRaisedException, match="rank 1 failed on purpose"):
        spawn_with_deadline(sm.fail_on_rank, args=(1,), nprocs=2, method="spawn", timeout=60)


def test_report_rank_puts_rank_and_pid():
    queue = tmp.get_context("spawn").SimpleQueue()
    spawn_with_deadline(sm.report_rank, args=(queue,), nprocs=2, method="spawn")
    assert sorted(rank for rank, _ in (queue.get(), queue.get())) == [0, 1]


@pytest.mark.parametrize("method", [*METHODS, "forkserver+preload"])
def test_startup_latencies_one_per_child(method):
    if method.split("+")[0] not in METHODS:
        pytest.skip(f"{method} is not available here")
    latencies = sm.startup_latencies(method, nprocs=2)
    assert len(latencies) == 2 and all(0 < s < 60 for s in latencies)


@pytest.mark.skipif("fork" not in METHODS, reason="needs fork")
def test_fork_starts_at_least_10x_faster_than_spawn():
    # A robust, large effect: fork copies a running process, spawn starts Python and imports torch.
    fork = max(sm.startup_latencies("fork", nprocs=1))
    spawn = min(sm.startup_latencies("spawn", nprocs=1))
    assert spawn > 10 * fork


def test_startup_latencies_rejects_unknown_methods():
    with pytest.raises(ValueError, match="must be one of"):
        sm.startup_latencies("threads")


def test_guard_script_without_guard_fails_in_the_child_and_with_guard_works():
    unguarded = run_python_script(sm.guard_script(guarded=False), timeout=60)
    assert "bootstrapping phase" in unguarded.stderr
    assert "parent: child exit code 1" in unguarded.stdout
    guarded = run_python_script(sm.guard_script(guarded=True), timeout=60)
    assert guarded.stdout.splitlines() == ["child: work() ran", "parent: child exit code 0"]


def test_set_start_method_twice_raises_and_get_context_does_not():
    done = run_python_script(sm.SET_START_METHOD_TWICE)
    assert "second call: RuntimeError: context has already been set" in done.stdout
    assert "get_context: ok, method = spawn" in done.stdout
