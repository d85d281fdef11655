"""helpers.hogwild: the worker notebook 05 shows, its launch under every start method, the race,
the measurements and the command line."""

from __future__ import annotations

import queue
import subprocess
import sys

import matplotlib
import pytest
import torch
import torch.multiprocessing as mp

from helpers import hogwild
from helpers.digits import accuracy, load_digits_split, make_model
from helpers.processes import live_children
from tests.workers import FRESH, METHODS

matplotlib.use("Agg")
pytestmark = pytest.mark.timeout(600)  # spawn children import torch: slow on a busy machine


@pytest.fixture(scope="module")
def data():
    return load_digits_split()


def test_the_worker_trains_the_model_it_is_given_in_place_and_reproducibly(data):
    x, y, _, _ = data
    threads = torch.get_num_threads()
    try:
        a, b, c = (make_model(hidden=hogwild.HIDDEN) for _ in range(3))
        before = a[0].weight.clone()
        hogwild.train_worker(0, a, x, y, steps=5)
        hogwild.train_worker(0, b, x, y, steps=5)
        hogwild.train_worker(1, c, x, y, steps=5)  # rank 1: seed + 1, other batches
        assert torch.get_num_threads() == 1, "the worker sets its thread count"
    finally:
        torch.set_num_threads(threads)
    assert not torch.equal(before, a[0].weight)
    assert torch.equal(a[0].weight, b[0].weight)
    assert not torch.equal(a[0].weight, c[0].weight)


@pytest.mark.spawn_in_notebook("05", "train_worker")
@pytest.mark.parametrize("method", METHODS)
def test_the_notebook_launch_trains_the_shared_model_under_every_start_method(method, data):
    x, y, x_test, y_test = data
    hogwild.warm_up_optimizer()
    model = make_model(hidden=hogwild.HIDDEN).share_memory()
    ctx = mp.get_context(method)
    steps = 10 * len(x) // (2 * hogwild.BATCH_SIZE)  # 10 epochs in all
    workers = [ctx.Process(target=hogwild.train_worker, args=(r, model, x, y, steps)) for r in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [w.exitcode for w in workers] == [0, 0]
    assert accuracy(model, x_test, y_test) > 0.8


def test_timed_worker_wraps_train_worker_and_reports_its_times(data):
    assert hogwild._timed_worker.__wrapped__ is hogwild.train_worker
    results = queue.SimpleQueue()
    threads = torch.get_num_threads()
    try:
        hogwild._timed_worker(3, results, make_model(), data[0], data[1], 2)
    finally:
        torch.set_num_threads(threads)
    rank, start, end = results.get_nowait()
    assert rank == 3 and start <= end


@pytest.mark.spawn_in_notebook("05", "measure_speedup")
@pytest.mark.parametrize("method", METHODS)
def test_run_hogwild_measures_a_run_under_every_start_method(method):
    run = hogwild._run_hogwild(nprocs=2, epochs=2, method=method)
    assert run["label"] == f"2 proc x 1 thr {method}" and run["nprocs"] == 2
    assert run["steady"] > 0 and run["wall"] > 0 and 0.0 <= run["accuracy"] <= 1.0
    assert live_children() == []


def test_run_hogwild_refuses_threads_under_fork_and_cleans_up_on_a_timeout():
    if "fork" in METHODS:
        with pytest.raises(ValueError, match="OpenMP"):
            hogwild._run_hogwild(2, 1, method="fork", threads=2)
    with pytest.raises(queue.Empty):
        hogwild._run_hogwild(2, 1, method="spawn", timeout=0.01)  # no spawn child starts that fast
    assert live_children() == []


def test_run_single_restores_threads_and_rng():
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    run = hogwild._run_single(epochs=1, threads=1)
    assert torch.get_num_threads() == threads and torch.equal(torch.rand(1), expected)
    assert run["nprocs"] == 1 and run["steady"] > 0
    with pytest.raises(ValueError, match="epochs"):
        hogwild._run_single(epochs=0)


def _adds(method: str, lock: bool) -> int:
    """The notebook's race, launched as its cell launches it; returns the increments lost."""
    ctx = mp.get_context(method)
    counter = torch.zeros(10_000).share_memory_()
    line_up = ctx.Barrier(2)
    step_lock = ctx.Lock() if lock else None
    adders = [
        ctx.Process(target=hogwild.add_ones, args=(r, counter, 20, step_lock, line_up)) for r in range(2)
    ]
    for adder in adders:
        adder.start()
    for adder in adders:
        adder.join(timeout=300)
    assert [a.exitcode for a in adders] == [0, 0]
    return int((40 - counter.double()).sum())


@pytest.mark.spawn_in_notebook("05", "add_ones")
@pytest.mark.parametrize("method", METHODS)
def test_locked_adds_lose_nothing(method):
    assert _adds(method, lock=True) == 0


def test_unlocked_adds_lose_some_or_none_but_never_gain():
    assert _adds(METHODS[0], lock=False) >= 0


def test_measure_speedup_reports_the_four_runs_and_the_load(capsys):
    result = hogwild.measure_speedup(epochs=1, repeats=1, method=METHODS[0])
    assert sorted(result["runs"]) == ["1 thread", "2 threads", "hogwild", "own models"]
    assert len(result["load_before"]) == 3 and len(result["load_after"]) == 3
    assert result["runs"]["own models"]["accuracy"] is None and result["runs"]["hogwild"]["nprocs"] == 2
    out = capsys.readouterr().out
    assert "load average" in out and "ceiling: 2 processes, a model each" in out
    assert live_children() == []


def test_own_models_trains_a_model_per_worker_and_leaves_the_shared_one_alone():
    run = hogwild._run_hogwild(nprocs=2, epochs=1, own_models=True)
    assert run["label"].endswith(", own models") and run["accuracy"] is None and run["steady"] > 0


def _own_models(monkeypatch, method: str, in_shared_memory: bool) -> list:
    """The models an own-models run trains, as this process sees them after the run."""
    made = []

    def recording(*args):
        made.append(make_model(*args))
        return made[-1]

    monkeypatch.setattr(hogwild, "make_model", recording)
    run = hogwild._run_hogwild(2, 1, method, own_models=True, own_in_shared_memory=in_shared_memory)
    assert run["label"].endswith("own models in shared memory" if in_shared_memory else "own models")
    return made[1:]  # made[0] is the shared model, unused by an own-models run


@pytest.mark.parametrize("method", METHODS)
def test_own_models_in_shared_memory_are_trained_in_the_parents_memory(monkeypatch, method):
    untrained = make_model(0, hogwild.HIDDEN)[0].weight
    own = _own_models(monkeypatch, method, in_shared_memory=True)
    assert all(m[0].weight.is_shared() and not torch.equal(m[0].weight, untrained) for m in own)
    assert not torch.equal(own[0][0].weight, own[1][0].weight)  # a model each: seed + rank batches


def test_own_private_models_under_fork_stay_private(monkeypatch):
    if "fork" not in METHODS:
        pytest.skip("no fork on this platform")
    untrained = make_model(0, hogwild.HIDDEN)[0].weight
    own = _own_models(monkeypatch, "fork", in_shared_memory=False)
    assert all(not m[0].weight.is_shared() and torch.equal(m[0].weight, untrained) for m in own)


def test_own_private_models_reach_forkserver_children_in_shared_memory(monkeypatch):
    """Why measure_sharing_cost leaves out its second run under spawn and forkserver: the first run's
    private models are moved to shared memory on their way to the children, and trained there."""
    if "forkserver" not in METHODS:
        pytest.skip("no forkserver on this platform")
    untrained = make_model(0, hogwild.HIDDEN)[0].weight
    own = _own_models(monkeypatch, "forkserver", in_shared_memory=False)
    assert all(m[0].weight.is_shared() and not torch.equal(m[0].weight, untrained) for m in own)


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_measure_sharing_cost_reports_its_runs_against_the_ceiling(capsys, method):
    if method not in METHODS:
        pytest.skip(f"no {method} on this platform")
    result = hogwild.measure_sharing_cost(epochs=1, repeats=1, method=method)
    pages = ["own models, shared memory"] if method == "fork" else []
    assert list(result["runs"]) == ["own models", *pages, "hogwild"]
    assert result["runs"]["hogwild"]["accuracy"] is not None
    assert result["runs"]["own models"]["accuracy"] is None
    out = capsys.readouterr().out
    assert "load average" in out and out.count("of the ceiling") == 1 + len(pages) + 1
    assert " 1.00 of the ceiling" in out and ("not repeated" in out) == (method != "fork")
    assert live_children() == []


def test_measure_threads_runs_the_advised_count_and_its_multiples(capsys, monkeypatch):
    monkeypatch.setattr(hogwild.os, "cpu_count", lambda: 2)  # the notebook's case on any machine
    method = FRESH  # this test process's forkserver has torch imported (conftest.py)
    result = hogwild.measure_threads(nprocs=2, epochs=1, method=method)
    assert result["advised"] == 1 and list(result["runs"]) == [1, 2, 4]
    assert all(run["label"] == f"2 proc x {t} thr {method}" for t, run in result["runs"].items())
    out = capsys.readouterr().out
    assert "advised: 2 // 2 = 1 thread(s)" in out and " 1.00x the advised" in out
    assert "oversubscribed" not in out.split("2 x 2 = 4")[0] and out.count("oversubscribed") == 2
    with pytest.raises(ValueError, match="OpenMP"):
        hogwild.measure_threads(threads=(2,), nprocs=2, epochs=1, method="fork")
    assert live_children() == []


def test_run_single_stops_after_its_budget():
    def steps_done(run):  # steady = samples / wall, BATCH_SIZE samples a step
        return round(run["steady"] * run["wall"] / hogwild.BATCH_SIZE)

    steps = hogwild._steps(50, 1)
    assert steps_done(hogwild._run_single(epochs=50, budget=0.0)) == steps // 10  # one tenth, then it stops
    assert steps_done(hogwild._run_single(epochs=50)) == steps


def test_explore_is_the_widget_callback():
    assert hogwild.explore(1)["nprocs"] == 1
    with pytest.raises(ValueError, match="1 to 4"):
        hogwild.explore(nprocs=9)


def test_cli_help_and_a_run_as_a_script():
    """Under this platform's fast method: notebook 05 runs the same measurement under spawn on the
    macOS path (`make test-wheel`), and a spawn run here cost 25 CPU-seconds for that again."""
    from helpers.launch import FAST_METHOD

    help_text = subprocess.run(
        [sys.executable, "-m", "helpers.hogwild", "--help"], capture_output=True, text=True, timeout=60
    )
    assert help_text.returncode == 0 and "--repeats" in help_text.stdout
    run = subprocess.run(
        [sys.executable, "-m", "helpers.hogwild", "--epochs", "1", "--repeats", "1", "--method", FAST_METHOD],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert run.returncode == 0, run.stderr
    assert (
        f"{FAST_METHOD}; median of 1" in run.stdout and "Hogwild: 2 processes, 1 shared model" in run.stdout
    )
