"""Exercise 04 (notebook 04): a worker that survives fork from a busy parent; a parent that keeps CUDA out."""

from __future__ import annotations

import importlib
import math
import multiprocessing as mp
import os
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    Incorrect,
    Report,
    importable,
    is_stub,
    resolve,
    run_check,
    run_in_child,
    value_of,
)

__all__ = ["check_ex04"]

SECONDS = 10
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""


def _call_and_count_threads(module_name: str, func_name: str, args: tuple) -> tuple[object, int]:
    """Child side of check_ex04: the worker's value and the torch thread count it left behind."""
    import torch

    value = resolve(importlib.import_module(module_name), func_name)(*args)
    return value, torch.get_num_threads()


CUDA_CALLS = ("is_available", "device_count", "init", "current_device", "set_device", "get_device_name")


def _run_recorded(module_name: str, n_workers: int) -> dict:
    """Child side of check_ex04 part 2: record this process's torch.cuda calls and process starts, in order.

    The spies are installed before the learner's module is (re)loaded, so a ``torch.cuda`` call at
    its top level is recorded too. Only calls made in this process count: fork children inherit
    the spies but have other process ids; spawn children import torch afresh.
    """
    import torch

    me = os.getpid()
    events: list[str] = []

    def spy(name, real):
        def recorded(*args, **kwargs):
            if os.getpid() == me:
                events.append(f"torch.cuda.{name}()")
            return real(*args, **kwargs)

        return recorded

    for name in CUDA_CALLS:
        setattr(torch.cuda, name, spy(name, getattr(torch.cuda, name)))
    real_start = mp.process.BaseProcess.start

    def start(self):
        if os.getpid() == me:
            events.append(f"start:{getattr(self, '_start_method', None) or mp.get_start_method()}")
        return real_start(self)

    mp.process.BaseProcess.start = start
    module = importlib.reload(importlib.import_module(module_name))
    results = module.run_workers(n_workers)
    return {"events": events, "results": results}


def _check_parent(module: str, report: Report, timeout: float, n_workers: int = 2) -> None:
    """Part 2: run ``run_workers`` under the spies; judge the order of calls and the results."""
    outcome = run_in_child(__name__, "_run_recorded", (module, n_workers), timeout=timeout)
    hint = (
        f"run_workers({n_workers}) did not return within {timeout:.0f} s: read the results (get with a "
        "timeout) before you join the workers, and join with a timeout"
    )
    recorded = value_of(outcome, f"run_workers({n_workers})", hint)
    events, results = recorded["events"], recorded["results"]
    starts = [i for i, e in enumerate(events) if e.startswith("start:")]
    if len(starts) != n_workers:
        raise Incorrect(f"run_workers({n_workers}) started {len(starts)} processes; start one per worker")
    early = [e for e in events[: starts[-1]] if e.startswith("torch.cuda.")]
    if early:
        raise Incorrect(
            f"the parent called {early[0]} before starting its workers (in run_workers or at the top of the "
            "file): on a machine with a GPU, that first query already makes every later fork child unable "
            "to use CUDA (torch's bad-fork flag). Ask "
            "torch.cuda.is_available() in the worker, never in the parent"
        )
    methods = sorted({e.split(":", 1)[1] for e in events if e.startswith("start:")})
    if "fork" in methods:
        raise Incorrect(
            "your workers were started with fork: a fork child cannot use CUDA once its parent has "
            "touched it. Use mp.get_context('spawn') (or 'forkserver') for workers that may use a GPU"
        )
    expected_ranks = list(range(n_workers))
    if (
        not isinstance(results, list)
        or [r[0] for r in results if isinstance(r, tuple | list) and len(r) == 3] != expected_ranks
    ):
        raise Incorrect(
            f"run_workers({n_workers}) returned {results!r}: return the {n_workers} (rank, device, value) "
            "tuples the workers put on the Queue, sorted by rank"
        )
    if any(float(value) != 1000.0 or not str(dev).startswith(("cpu", "cuda")) for _, dev, value in results):
        raise Incorrect(
            f"the workers sent {results!r}: each puts (rank, str(device), torch.ones(1000).sum().item())"
        )
    report.ok(
        f"the parent made no torch.cuda call before it started {n_workers} {methods[0]} workers; each chose "
        f"its own device ({', '.join(str(r[1]) for r in results)}) and sent its result"
    )


def _check_fork_safe(module: str, report: Report, timeout: float, size: int) -> bool:
    """Part 1: ``fork_safe_sum`` in a fork child of a parent that used its thread pool; True when right."""
    import torch

    if "fork" not in mp.get_all_start_methods():
        report.ok("fork is not available on this platform, so the hazard cannot occur here")
        return True
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, threads))
    try:
        torch.randn(size, dtype=torch.float64).float()  # the parent has now used its OpenMP pool
        outcome = run_in_child(
            __name__,
            "_call_and_count_threads",
            (module, "fork_safe_sum", (size,)),
            method="fork",
            timeout=timeout,
        )
    finally:
        torch.set_num_threads(threads)
    hint = (
        f"your worker hung in the fork child (killed after {timeout:.0f} s): the parent had already "
        "run a multi-threaded op, and GNU OpenMP's thread pool does not survive fork. Call "
        "torch.set_num_threads(1) at the start of the worker, before its first torch op."
    )
    value, child_threads = value_of(outcome, "the worker", hint)
    if not isinstance(value, float) or not math.isfinite(value):
        raise Incorrect(f"fork_safe_sum returned {value!r}: return a finite Python float (float(...sum()))")
    if child_threads != 1:
        raise Incorrect(
            f"it finished here, but the child still used {child_threads} threads: with GNU OpenMP it "
            "hangs. Call torch.set_num_threads(1) before the first torch op."
        )
    report.ok(f"the fork child set 1 thread and finished in {outcome.seconds:.2f} s")
    return True


def check_ex04(
    module: str | os.PathLike = "helpers.exercises.ex04_fork_safe",
    timeout: float = 15.0,
    size: int = 4_000_000,
    parent_timeout: float | None = None,
) -> CheckResult:
    """Check exercise 04: a fork-safe worker (part 1); a parent that keeps CUDA out (part 2).

    Part 1: the parent (this process) first runs a multi-threaded op on at least 2 threads; the
    worker then runs in a fork child with a ``timeout``. With GNU OpenMP, a worker that does not
    limit its threads first hangs and is killed at the deadline. Part 2: ``run_workers(2)`` runs in
    a child that records its ``torch.cuda`` calls and process starts in order (on a CPU machine no
    bad-fork flag would ever show, so the order of calls is what is checked): no CUDA query before
    the last start, no fork start, and the workers' results returned.

    Notebook 04, its closing programming exercise.

    >>> check_ex04("helpers.solutions.ex04_fork_safe").passed  # doctest: +SKIP
    checking .../solutions/ex04_fork_safe.py (takes about 10 s) ...
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        if _check_fork_safe(module, report, timeout, size):
            run_workers = getattr(mod, "run_workers", None)
            if run_workers is None or is_stub(run_workers):
                raise Incorrect(
                    "part 1 passed; part 2 is not attempted yet: write run_workers (and its worker)"
                )
            else:
                _check_parent(
                    module, report, max(timeout, 60.0) if parent_timeout is None else parent_timeout
                )

    return run_check("ex04", module, ("fork_safe_sum",), body, SECONDS)
