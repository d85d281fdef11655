"""helpers.hogwild: data, model, the worker, Hogwild runs under every start method, the race, the CLI."""

from __future__ import annotations

import queue
import subprocess
import sys

import matplotlib
import pytest
import torch

import helpers.hogwild as hw
from helpers.launch import WorkerFailed
from tests.workers import METHODS

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def data():
    return hw.load_digits_split()


def test_split_is_fixed_and_stratified(data):
    again = hw.load_digits_split()
    assert torch.equal(data.x_test, again.x_test) and torch.equal(data.y_train, again.y_train)
    assert 0.0 <= data.x_train.min() and data.x_train.max() <= 1.0
    assert sorted(data.y_test.unique().tolist()) == list(range(10))


def test_model_weights_depend_only_on_the_seed():
    a, b, c = hw.make_model(1), hw.make_model(1), hw.make_model(2)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a[0].weight, c[0].weight)


def test_evaluate_counts_correct_predictions(data):
    model = hw.make_model()
    predicted = model(data.x_test).argmax(dim=1)
    assert hw.evaluate(model, data.x_test, predicted) == 1.0


def test_worker_reports_progress_then_done(data):
    reports = queue.SimpleQueue()
    model = hw.make_model()
    before = model[0].weight.clone()
    hw.train_worker(0, model, data, steps=10, lr=0.05, seed=0, threads=1, reports=reports, report_every=5)
    messages = [reports.get() for _ in range(reports.qsize())]
    kinds = [m[0] for m in messages]
    assert kinds.count("loss") == 2 and kinds[-1] == "done" and "acc" in kinds
    assert messages[-1][2] == 10 * hw.BATCH_SIZE
    assert not torch.equal(before, model[0].weight), "the worker updates the model it was given in place"


@pytest.mark.parametrize("method", METHODS)
def test_train_runs_under_every_start_method(method, data):
    seen = []
    history = hw.train(nprocs=2, epochs=2, method=method, data=data, on_report=seen.append)
    assert sorted(history.workers) == [0, 1] and sorted(history.losses) == [0, 1]
    assert history.samples == 2 * hw._steps(2, len(data.x_train), 2) * hw.BATCH_SIZE
    assert history.accuracies and history.steady > 0 and history.wall > 0
    assert [m for m in seen if m[0] == "done"] and 0 <= history.test_accuracy <= 1


def test_hogwild_converges(data):
    history = hw.train(nprocs=2, epochs=10, data=data, method=METHODS[0])
    assert history.test_accuracy > 0.8, history.summary()


def test_locked_variant_trains_too(data):
    history = hw.train(nprocs=2, epochs=2, lock=True, data=data, method=METHODS[0])
    assert history.label.endswith("locked") and len(history.workers) == 2


def test_a_failing_worker_surfaces_its_traceback(data):
    with pytest.raises(WorkerFailed, match="Invalid learning rate"):
        hw.train(nprocs=2, epochs=1, lr=-1.0, data=data, method=METHODS[0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"nprocs": 0}, "nprocs"),
        ({"threads": 0}, "threads"),
        ({"epochs": 0}, "epochs"),
        ({"device": "cuda", "method": "fork"}, "spawn"),
        ({"threads": 2, "method": "fork"}, "OpenMP"),
    ],
)
def test_train_refuses_bad_input(kwargs, message, data):
    if kwargs.get("method") == "fork" and "fork" not in METHODS:
        pytest.skip("no fork here")
    with pytest.raises(ValueError, match=message):
        hw.train(data=data, **kwargs)


def test_train_single_restores_threads_and_rng(data):
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    history = hw.train_single(epochs=1, threads=1, data=data)
    assert torch.get_num_threads() == threads and torch.equal(torch.rand(1), expected)
    assert history.nprocs == 1 and history.wall > 0 and history.losses[0]


@pytest.mark.parametrize("method", METHODS)
def test_locked_adds_lose_nothing(method):
    assert hw.lost_updates(nprocs=2, adds=20, size=10_000, lock=True, method=method) == 0


def test_unlocked_adds_lose_some_or_none_but_never_gain():
    assert hw.lost_updates(nprocs=2, adds=20, size=10_000, method=METHODS[0]) >= 0


def test_plot_history_draws_one_line_per_worker(data):
    history = hw.train(nprocs=2, epochs=1, data=data, method=METHODS[0])
    fig = hw.plot_history(history)
    assert len(fig.axes[0].lines) == 2 and len(fig.axes[1].lines) == 1


def test_explore_is_the_widget_callback():
    history = hw.explore(nprocs=2, lr=0.1, epochs=1)
    assert history.nprocs == 2
    with pytest.raises(ValueError, match="1-4 processes"):
        hw.explore(nprocs=9)


def test_cli_help_and_a_spawn_run_as_a_script():
    help_text = subprocess.run(
        [sys.executable, "-m", "helpers.hogwild", "--help"], capture_output=True, text=True, timeout=60
    )
    assert help_text.returncode == 0 and "--nprocs" in help_text.stdout
    run = subprocess.run(
        [sys.executable, "-m", "helpers.hogwild", "--epochs", "1", "--method", "spawn"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "2 proc x 1 thr spawn" in run.stdout
