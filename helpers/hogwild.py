"""Hogwild: several processes update one shared model without locks (notebook 05).

The pattern (PyTorch's "Multiprocessing best practices" and pytorch/examples ``mnist_hogwild``):
the parent calls ``model.share_memory()`` and starts one process per worker; each worker sets its
thread count, seeds itself with ``seed + rank``, builds its *own* optimizer over the shared
parameters and runs SGD. Every ``optimizer.step()`` writes straight into the shared storage, with
no lock. :func:`train_worker` is that worker, shown in full in notebook 05; :func:`_timed_worker`
wraps it for the measurements, and ``python -m helpers.hogwild`` measures Hogwild beside the
machine's ceiling (two processes with a model each) and the 1- and 2-thread single process
(medians of interleaved runs, with the load average).

Data and model: :mod:`helpers.digits` (the digits; an MLP 64-256-256-10).

Example::

    >>> import torch
    >>> from helpers.digits import load_digits_split, make_model
    >>> x, y, x_test, y_test = load_digits_split()
    >>> model = make_model(hidden=HIDDEN).share_memory()
    >>> threads = torch.get_num_threads()
    >>> train_worker(0, model, x, y, steps=5)  # one worker, in this process: it sets 1 thread
    >>> torch.get_num_threads()
    1
    >>> torch.set_num_threads(threads)
"""

from __future__ import annotations

import argparse
import os
import time
from typing import TYPE_CHECKING

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

from helpers.digits import accuracy, load_digits_split, make_model
from helpers.launch import FAST_METHOD

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier, Lock

    from torch import nn

__all__ = [
    "BATCH_SIZE",
    "LR",
    "HIDDEN",
    "train_worker",
    "warm_up_optimizer",
    "add_ones",
    "measure_speedup",
    "measure_sharing_cost",
    "measure_threads",
    "explore",
    "main",
]

BATCH_SIZE = 32
LR = 0.05
HIDDEN = (256, 256)  # 85k parameters: enough work per step to share out over cores


def train_worker(
    rank: int, model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, seed: int = 0, threads: int = 1
) -> None:
    """One Hogwild worker: ``steps`` SGD steps on the shared ``model``, without any lock.
    [05 · The Hogwild pattern](../notebooks/05_hogwild.ipynb#the-hogwild-pattern) shows it and starts it in each process;
    [05 · On a GPU](../notebooks/05_hogwild.ipynb#on-a-gpu) runs it on a GPU.

    >>> train_worker(0, make_model(), *load_digits_split()[:2], steps=2, threads=torch.get_num_threads())
    """
    torch.set_num_threads(threads)  # first, before any torch op: fork-safe, no oversubscription
    torch.manual_seed(seed + rank)  # each worker draws its own batches
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.5)  # its own momentum buffers
    for _ in range(steps):
        batch = torch.randint(len(x), (BATCH_SIZE,), device=x.device)
        optimizer.zero_grad()
        F.cross_entropy(model(x[batch]), y[batch]).backward()
        optimizer.step()  # writes straight into the shared parameters


def warm_up_optimizer() -> None:
    """Build one throwaway optimizer here, once: torch.optim's first use imports ``torch._dynamo``
    (about 800 modules, seconds on a busy 2-core machine). Fork children then inherit the import,
    and a timed worker keeps it out of its timing.
    Notebook 05's setup calls it; the comment there says so.

    >>> warm_up_optimizer()
    >>> import sys; "torch._dynamo" in sys.modules
    True
    """
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=0.5)


def _timed_worker(rank: int, results: Queue, *args: object) -> None:
    """:func:`train_worker` timed inside its process: puts ``(rank, start, end)`` on ``results``.

    ``start``/``end`` are ``time.monotonic()`` (system-wide on Linux, so comparable between
    processes), taken after the optimizer import so start-up stays out of the training time.

    >>> import queue
    >>> results = queue.SimpleQueue()
    >>> _timed_worker(0, results, make_model(), *load_digits_split()[:2], 2, 0, torch.get_num_threads())
    >>> rank, start, end = results.get(); rank, start <= end
    (0, True)
    """
    warm_up_optimizer()
    start = time.monotonic()
    train_worker(rank, *args)
    results.put((rank, start, time.monotonic()))


_timed_worker.__wrapped__ = train_worker  # the notebook shows train_worker; this only adds the clock


def add_ones(
    rank: int, tensor: torch.Tensor, adds: int, lock: Lock | None = None, start: Barrier | None = None
) -> None:
    """Add 1 to every element of the shared ``tensor``, ``adds`` times; with ``lock``, one add at a time.

    ``start`` (a Barrier) lines the workers up so their adds overlap
    ([05 · What Hogwild gives up](../notebooks/05_hogwild.ipynb#what-hogwild-gives-up-updates-race)).

    >>> t = torch.zeros(3)
    >>> add_ones(0, t, adds=5)
    >>> t.tolist()
    [5.0, 5.0, 5.0]
    """
    torch.set_num_threads(1)
    if start is not None:
        start.wait(30)
    for _ in range(adds):
        if lock is None:
            tensor.add_(1)  # read, add, write back: two processes can both read the old value
        else:
            with lock:
                tensor.add_(1)


def _steps(epochs: float, nprocs: int) -> int:
    """Steps per worker so that all workers together see ``epochs`` passes over the training set."""
    from helpers.digits import N_TRAIN

    if epochs <= 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    return max(1, round(epochs * N_TRAIN / BATCH_SIZE / nprocs))


def _run_hogwild(
    nprocs: int,
    epochs: float,
    method: str = FAST_METHOD,
    threads: int = 1,
    seed: int = 0,
    timeout: float = 120.0,
    own_models: bool = False,
    own_in_shared_memory: bool = False,
) -> dict:
    """Measure one Hogwild run: :func:`_timed_worker` in ``nprocs`` processes, ``epochs`` passes in all.

    Returns ``{"label", "nprocs", "wall", "steady", "accuracy"}``: ``wall`` from the first
    ``start()`` to the last join (start-up included), ``steady`` samples per second while the
    workers trained (timed inside them), ``accuracy`` of the shared model on the test set. With
    ``own_models=True`` each worker trains a model of its own instead (nothing shared between
    workers: the machine's ceiling for ``nprocs`` processes; ``accuracy`` is None). Used by
    :func:`measure_speedup` ([05 · Is it faster?](../notebooks/05_hogwild.ipynb#is-it-faster)) and the widget.

    >>> run = _run_hogwild(nprocs=2, epochs=1)
    >>> run["nprocs"], 0.0 < run["accuracy"] <= 1.0
    (2, True)
    """
    from helpers.processes import running

    if threads > 1 and method == "fork":
        raise ValueError("threads > 1 in fork children can hang in GNU OpenMP (notebook 04): use forkserver")
    x, y, x_test, y_test = load_digits_split()
    warm_up_optimizer()
    model = make_model(seed, HIDDEN).share_memory()
    models = [make_model(seed, HIDDEN) for _ in range(nprocs)] if own_models else [model] * nprocs
    if own_models and own_in_shared_memory:
        models = [own.share_memory() for own in models]
    ctx = mp.get_context(method)
    results = ctx.Queue()
    steps = _steps(epochs, nprocs)
    procs = [
        ctx.Process(target=_timed_worker, args=(rank, results, models[rank], x, y, steps, seed, threads))
        for rank in range(nprocs)
    ]
    start = time.monotonic()
    with running(procs, timeout=timeout):
        times = [results.get(timeout=timeout) for _ in procs]  # get first, then join (notebook 03)
    wall = time.monotonic() - start
    if any(p.exitcode != 0 for p in procs):
        raise RuntimeError(f"Hogwild workers failed: exit codes {[p.exitcode for p in procs]}")
    trained = max(end for _, _, end in times) - min(begin for _, begin, _ in times)
    label = f"{nprocs} proc x {threads} thr {method}" + (", own models" if own_models else "")
    label += " in shared memory" if own_models and own_in_shared_memory else ""
    steady = nprocs * steps * BATCH_SIZE / trained
    return {
        "label": label,
        "nprocs": nprocs,
        "wall": wall,
        "steady": steady,
        "accuracy": None if own_models else accuracy(model, x_test, y_test),
    }


def _run_single(epochs: float, threads: int = 1, seed: int = 0, budget: float | None = None) -> dict:
    """The baseline: :func:`train_worker` in *this* process (no start-up), ``threads`` threads.
    [05 · Is it faster?](../notebooks/05_hogwild.ipynb#is-it-faster), the single-process baselines.

    Same result keys as :func:`_run_hogwild` (``wall`` equals the training time here). With
    ``budget`` (seconds) it trains in tenths of the run and stops after the first tenth that ends
    past the budget; ``steady`` counts the samples it did. On a loaded machine 2 threads can be 100
    times slower than 1, and the budget keeps such a run short. This process's thread count and
    random state are restored afterwards.

    >>> _run_single(epochs=1)["nprocs"]
    1
    >>> run = _run_single(epochs=100, budget=0.0)  # one tenth of 100 epochs, then it stops
    >>> round(run["steady"] * run["wall"] / BATCH_SIZE) == _steps(100, 1) // 10  # the steps it did
    True
    """
    x, y, x_test, y_test = load_digits_split()
    warm_up_optimizer()
    model = make_model(seed, HIDDEN)
    steps = _steps(epochs, 1)
    chunk = steps if budget is None else max(1, steps // 10)
    done = 0
    before = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        start = time.monotonic()
        try:
            while done < steps and (budget is None or done == 0 or time.monotonic() - start < budget):
                now = min(chunk, steps - done)
                train_worker(0, model, x, y, now, seed + done, threads)  # a new seed: other batches
                done += now
        finally:
            torch.set_num_threads(before)
        wall = time.monotonic() - start
    label = f"1 proc x {threads} thr"
    steady = done * BATCH_SIZE / wall
    return {
        "label": label,
        "nprocs": 1,
        "wall": wall,
        "steady": steady,
        "accuracy": accuracy(model, x_test, y_test),
    }


def _median_runs(runs: dict, repeats: int) -> dict[str, dict]:
    """Run each of ``runs`` (name: a function returning a run) ``repeats`` times, interleaved; the
    median run of each by steady-state throughput."""
    rounds: dict[str, list[dict]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            rounds[name].append(run())
    return {name: sorted(done, key=lambda r: r["steady"])[len(done) // 2] for name, done in rounds.items()}


def measure_speedup(
    epochs: float = 150, repeats: int = 5, method: str = FAST_METHOD, nprocs: int = 2, budget: float = 5.0
) -> dict:
    """Hogwild beside the machine's ceiling and two single-process baselines: medians of
    ``repeats`` interleaved rounds (a change in the machine's load hits every run alike).
    [05 · Is it faster?](../notebooks/05_hogwild.ipynb#is-it-faster) calls it; ``python -m helpers.hogwild`` runs it.

    Each round runs, ``epochs`` passes over the training set each: one process with 1 thread and
    with 2 threads (:func:`_run_single`, each stopped after ``budget`` seconds), Hogwild (``nprocs``
    workers, one shared model) and ``nprocs`` processes with a model each (nothing shared: the
    ceiling). Prints steady-state samples/s, each against the 1-thread process, the load average
    before and after, and the wall times of the 1-thread process and Hogwild (start-up included).
    Returns ``{"runs": {name: median run}, "load_before", "load_after"}`` with the names
    ``"1 thread"``, ``"2 threads"``, ``"hogwild"`` and ``"own models"``.

    >>> result = measure_speedup(epochs=1, repeats=1)  # doctest: +ELLIPSIS
    load average ...
    >>> sorted(result["runs"])
    ['1 thread', '2 threads', 'hogwild', 'own models']
    """
    load_before = os.getloadavg()
    runs = _median_runs(
        {
            "1 thread": lambda: _run_single(epochs, threads=1, budget=budget),
            "hogwild": lambda: _run_hogwild(nprocs, epochs, method=method),
            "2 threads": lambda: _run_single(epochs, threads=2, budget=budget),
            "own models": lambda: _run_hogwild(nprocs, epochs, method=method, own_models=True),
        },
        repeats,
    )
    load_after = os.getloadavg()
    base = runs["1 thread"]["steady"]
    names = {
        "1 thread": "1 process, 1 thread",
        "2 threads": "1 process, 2 threads",
        "hogwild": f"Hogwild: {nprocs} processes, 1 shared model",
        "own models": f"ceiling: {nprocs} processes, a model each",
    }
    print(
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, {os.cpu_count()} cores; "
        f"{method}; median of {repeats} interleaved rounds of {epochs:g} epochs"
    )
    for name, text in names.items():
        steady = runs[name]["steady"]
        print(f"  {text:<38} {steady:9,.0f} samples/s  {steady / base:5.2f}x")
    print(
        f"  wall time: 1 thread {runs['1 thread']['wall']:.2f} s, Hogwild {runs['hogwild']['wall']:.2f} s "
        "(start-up included)"
    )
    return {"runs": runs, "load_before": load_before, "load_after": load_after}


def measure_sharing_cost(epochs: float = 20, repeats: int = 3, method: str = FAST_METHOD) -> dict:
    """Where Hogwild's distance to the ceiling comes from: runs of 2 processes x 1 thread that
    differ in one thing each. Notebook 05, appendix "where sharing costs".

    ``"own models"`` (a private model each: the ceiling), ``"own models, shared memory"`` (a model
    each, moved to shared memory: the pages Hogwild uses, but no other process writes them) and
    ``"hogwild"`` (one model, both write it). Only fork keeps the first run's models private:
    spawn and forkserver move every tensor they send a child to shared memory (torch's pickling),
    so there the second run would repeat the first and is left out (two runs, not three). Medians of
    ``repeats`` interleaved rounds, steady state timed inside the workers. Prints each against the
    ceiling and the load average; returns ``{"runs": {name: median run}, "load_before", "load_after"}``.

    >>> result = measure_sharing_cost(epochs=1, repeats=1)  # doctest: +ELLIPSIS
    load average ...
    >>> {"own models", "hogwild"} <= set(result["runs"])
    True
    """
    load_before = os.getloadavg()
    variants = {
        "own models": lambda: _run_hogwild(2, epochs, method, own_models=True),
        "own models, shared memory": lambda: _run_hogwild(
            2, epochs, method, own_models=True, own_in_shared_memory=True
        ),
        "hogwild": lambda: _run_hogwild(2, epochs, method),
    }
    repeated = method != "fork"  # the first run's models reach the children in shared memory already
    if repeated:
        del variants["own models, shared memory"]
    runs = _median_runs(variants, repeats)
    load_after = os.getloadavg()
    print(
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, {os.cpu_count()} cores; "
        f"{method}; 2 processes x 1 thread; median of {repeats} interleaved rounds of {epochs:g} epochs"
    )
    if repeated:
        print(f"  (own models, shared memory: the same run as own models under {method}, not repeated)")
    ceiling = runs["own models"]["steady"]
    for name, run in runs.items():
        print(f"  {name:<27} {run['steady']:9,.0f} samples/s  {run['steady'] / ceiling:5.2f} of the ceiling")
    return {"runs": runs, "load_before": load_before, "load_after": load_after}


def measure_threads(
    threads: tuple[int, ...] | None = None,
    nprocs: int = 2,
    epochs: float = 4,
    repeats: int = 1,
    method: str = "spawn",
) -> dict:
    """Hogwild with ``nprocs`` processes x each of ``threads`` threads per process: steady-state
    samples/s, medians of ``repeats`` interleaved rounds. Notebook 05, appendix "processes x threads".

    ``method`` must not be fork when a thread count is above 1 (a fork child of a process that ran
    parallel ops hangs in GNU OpenMP; notebook 04). Prints one line per thread count, against the
    ``os.cpu_count() // nprocs`` threads that PyTorch's docs advise (``threads`` defaults to that
    count, twice and four times it: 1, 2 and 4 for 2 processes on 2 cores), and the load average; returns
    ``{"runs": {threads: median run}, "advised": threads, "load_before", "load_after"}``.

    >>> measure_threads(threads=(1,), epochs=1)["advised"] >= 1  # doctest: +ELLIPSIS
    load average ...
    True
    """
    cores = os.cpu_count() or 1
    advised = max(1, cores // nprocs)
    threads = threads or (advised, 2 * advised, 4 * advised)
    load_before = os.getloadavg()
    runs = _median_runs(
        {t: (lambda t=t: _run_hogwild(nprocs, epochs, method, threads=t)) for t in threads}, repeats
    )
    load_after = os.getloadavg()
    print(
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, {cores} cores; {method}; "
        f"{nprocs} Hogwild processes; median of {repeats}; advised: {cores} // {nprocs} = {advised} thread(s)"
    )
    base = runs[advised]["steady"] if advised in runs else None
    for t, run in runs.items():
        against = f"  {run['steady'] / base:5.2f}x the advised" if base else ""
        flag = "  oversubscribed" if nprocs * t > cores else ""
        print(f"  {nprocs} x {t} = {nprocs * t} threads: {run['steady']:9,.0f} samples/s{against}{flag}")
    return {"runs": runs, "advised": advised, "load_before": load_before, "load_after": load_after}


_EXPLORED: dict[int, dict] = {}


def explore(nprocs: int = 2) -> dict:
    """Widget callback of notebook 05: a Hogwild run of 20 epochs with ``nprocs`` workers (1 to 4).

    Prints the run's summary and plots steady-state throughput and test accuracy of every worker
    count tried so far (runs are cached). Uses fork where the platform has it, else spawn.

    >>> explore(1)["nprocs"]  # doctest: +ELLIPSIS
    {...}
    1
    """
    import matplotlib.pyplot as plt

    from helpers.plotting import bar_chart, new_figure

    if not 1 <= nprocs <= 4:
        raise ValueError(f"explore() takes 1 to 4 processes, got {nprocs}")
    method = FAST_METHOD
    if nprocs not in _EXPLORED:
        _EXPLORED[nprocs] = _run_hogwild(nprocs, epochs=20, method=method)
    runs = [_EXPLORED[n] for n in sorted(_EXPLORED)]
    fig, (left, right) = new_figure(f"Hogwild, 20 epochs in all ({method}, {os.cpu_count()} cores)", ncols=2)
    labels = [f"{r['nprocs']} proc" for r in runs]
    bar_chart(left, labels, [r["steady"] / 1e3 for r in runs], "{:.0f}k", ["#4c72b0"] * len(runs))
    left.set(ylabel="steady-state samples/s (thousands)")
    bar_chart(right, labels, [r["accuracy"] for r in runs], "{:.3f}", ["#55a868"] * len(runs))
    right.set(ylabel="test accuracy", ylim=(0, 1.1))
    plt.show()
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in _EXPLORED[nprocs].items()})
    return _EXPLORED[nprocs]


def main(argv: list[str] | None = None) -> dict:
    """Command line: ``python -m helpers.hogwild [--epochs 150] [--repeats 5] [--method fork]``.
    Notebook 05's appendix and its exercise 4 show the command.

    Runs :func:`measure_speedup`. For an idle 2-core measurement on a bigger machine, pin it:
    ``taskset -c 0,1 python -m helpers.hogwild``.

    One worker, started with :data:`FAST_METHOD`; ``tests/test_hogwild.py`` runs two under spawn,
    as a script:

    >>> result = main(["--epochs", "1", "--repeats", "1", "--nprocs", "1"])  # doctest: +ELLIPSIS
    load average ...
    >>> result["runs"]["hogwild"]["nprocs"]
    1
    """
    parser = argparse.ArgumentParser(
        prog="python -m helpers.hogwild", description=measure_speedup.__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--epochs",
        type=float,
        default=150,
        help="passes over the training set, all workers together (runs of seconds: shorter ones are noisy)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--method",
        choices=mp.get_all_start_methods(),
        default=FAST_METHOD,
    )
    parser.add_argument("--nprocs", type=int, default=2)
    args = parser.parse_args(argv)
    return measure_speedup(args.epochs, args.repeats, args.method, args.nprocs)


if __name__ == "__main__":
    # Re-import so the workers belong to helpers.hogwild, not __main__: spawn children import them.
    from helpers.hogwild import main as _main

    _main()
