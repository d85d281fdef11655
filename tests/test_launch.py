"""helpers.launch: importability guard, results, failures and deadlines, under every method."""

from __future__ import annotations

import sys
import types

import pytest
import torch.multiprocessing as tmp

from helpers.launch import (
    NotImportableError,
    WorkerFailed,
    check_importable,
    launch,
    main_is_importable,
    spawn_with_deadline,
)
from helpers.processes import live_children, run_python_script
from tests import workers
from tests.workers import FRESH, METHODS


def defined_in_main(rank):
    return rank


defined_in_main.__module__ = "__main__"  # what a notebook cell's function looks like


@pytest.fixture
def notebook_main(monkeypatch):
    """Make ``__main__`` look like a notebook kernel's: a module with no file and no spec."""
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
@pytest.mark.parametrize("fn", [defined_in_main, lambda rank: rank], ids=["__main__", "lambda"])
def test_unimportable_workers_are_refused_before_any_process_starts(method, fn, notebook_main):
    if method not in METHODS:
        pytest.skip(f"{method} is not available here")
    assert not main_is_importable()
    before = live_children()
    with pytest.raises(NotImportableError, match="move it into a module"):
        launch(fn, nprocs=2, method=method)
    assert live_children() == before


@pytest.mark.skipif("fork" not in METHODS, reason="fork is not available here")
def test_fork_accepts_a_main_function():
    check_importable(defined_in_main, "fork")
    assert launch(defined_in_main, nprocs=2, method="fork") == [0, 1]


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="unknown start method"):
        check_importable(workers.rank_and_pid, "threads")


@pytest.mark.parametrize("method", METHODS)
def test_launch_returns_results_in_rank_order(method):
    results = launch(workers.rank_and_pid, args=(10,), nprocs=3, method=method)
    assert [r for r, _ in results] == [10, 11, 12]
    assert len({pid for _, pid in results}) == 3


@pytest.mark.parametrize("method", METHODS)
def test_launch_returns_tensors_from_children(method):
    tensors = launch(workers.shared_ones, args=(1000,), nprocs=2, method=method)
    assert [float(t.sum()) for t in tensors] == [0.0, 1000.0]


def test_launch_sets_the_child_thread_count():
    assert launch(workers.thread_count, nprocs=1, method=FRESH, threads=1) == [1]


def test_launch_carries_the_child_traceback():
    with pytest.raises(WorkerFailed, match="ValueError: raised on purpose") as info:
        launch(workers.raise_value_error, nprocs=2, method=FRESH)
    assert info.value.rank in (0, 1)


def test_launch_reports_a_child_that_dies_silently():
    with pytest.raises(WorkerFailed, match="rank 1 exited with code 7") as info:
        launch(workers.exit_on_rank, args=(1, 7), nprocs=2, method=FRESH)
    assert info.value.exitcode == 7


def test_launch_deadline_terminates_slow_ranks():
    # Rank 1 sleeps past the deadline; on a loaded machine rank 0 may be late too, so both may be named.
    with pytest.raises(WorkerFailed, match=r"ranks \[(0, )?1\] did not finish"):
        launch(workers.sleep_on_rank, args=(1, 600), nprocs=2, method=FRESH, timeout=8)


def test_launch_rejects_zero_processes():
    with pytest.raises(ValueError, match="nprocs"):
        launch(workers.rank_and_pid, nprocs=0)


def test_spawn_with_deadline_raises_torchs_exception_with_the_traceback():
    with pytest.raises(tmp.ProcessRaisedException, match="raised on purpose"):
        spawn_with_deadline(workers.raise_value_error, nprocs=2, method=FRESH)


def test_spawn_with_deadline_times_out():
    with pytest.raises(TimeoutError):
        spawn_with_deadline(workers.sleep_on_rank, args=(0, 60), nprocs=1, method=FRESH, timeout=5)


SCRIPT_WITH_A_MAIN_WORKER = """\
from helpers.launch import launch, main_is_importable

def square(rank):
    return rank * rank

if __name__ == "__main__":
    print(main_is_importable(), launch(square, nprocs=3, method="{method}"))
"""


@pytest.mark.parametrize("method", [m for m in METHODS if m != "fork"])
def test_a_function_in_a_scripts_main_is_accepted_and_runs(method):
    # A spawn/forkserver child imports a script run as a file (as __mp_main__): nothing to refuse.
    done = run_python_script(SCRIPT_WITH_A_MAIN_WORKER.format(method=method), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True [0, 1, 4]"


def test_spawn_with_deadline_refuses_main_functions(notebook_main):
    with pytest.raises(NotImportableError):
        spawn_with_deadline(defined_in_main, nprocs=1, method=FRESH)


def test_spawn_with_deadline_runs_every_rank():
    queue = tmp.get_context(FRESH).SimpleQueue()
    spawn_with_deadline(workers.put_rank, args=(queue,), nprocs=2, method=FRESH)
    assert sorted(queue.get() for _ in range(2)) == [0, 1]
