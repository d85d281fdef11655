"""Exercise 02 (notebook 02): fix the lost updates; the total must be exact in real processes."""

from __future__ import annotations

import inspect
import multiprocessing as mp
import os
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    Incorrect,
    Report,
    importable,
    run_check,
    run_in_child,
    value_of,
)
from helpers.launch import FAST_METHOD

__all__ = ["check_ex02"]

SECONDS = 25
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""


def _source(obj: object) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _count(mod: ModuleType, method: str, nprocs: int, n: int, timeout: float, worker: str) -> str:
    """Run ``safe_count`` under ``method`` in a child; raise :class:`Incorrect` with what its total
    shows wrong, else say what was verified."""
    outcome = run_in_child(
        mod.__name__, "safe_count", (nprocs, n, method), method=FAST_METHOD, timeout=timeout
    )
    hint = (
        f"{method}: safe_count did not return within {timeout:.0f} s: does a worker wait for a "
        "lock that is never released, or a join have no timeout?"
    )
    value = value_of(outcome, f"{method}: safe_count", hint)
    try:
        total = int(value)
    except (TypeError, ValueError, RuntimeError):
        raise Incorrect(f"{method}: safe_count returned {value!r}: return the total as an int") from None
    expected = nprocs * n
    if total == 0 and method == "fork":
        raise Incorrect(
            "fork: the parent saw none of the additions: the tensor the workers write is not in "
            "shared memory, so each fork child wrote to its own copy-on-write copy. Call "
            "share_memory_() on it before starting the processes. (spawn hides this mistake: "
            "pickling a tensor for a spawn child moves it to shared memory.)"
        )
    if total < expected:
        hint = (
            "a Lock() created inside the worker is a different lock in each process, so none of "
            "them ever waits: create one ctx.Lock() in safe_count and pass it to every worker"
            if "Lock(" in worker
            else "hold one ctx.Lock() (created in safe_count, passed to every worker) around the "
            "read and the write together, or give each rank its own slot and sum them at the end"
        )
        raise Incorrect(
            f"{method}: lost {expected - total:,} of {expected:,} updates (counted {total:,}): two "
            f"processes read the same value and both wrote value + 1. Fix: {hint}"
        )
    if total > expected:
        raise Incorrect(
            f"{method}: counted {total:,}, more than the {expected:,} additions made: "
            "does each rank add 1 exactly n times, and does the parent sum each slot once?"
        )
    return f"{method}: {nprocs} processes x {n:,} additions, total {total:,}: none lost"


def check_ex02(
    module: str | os.PathLike = "helpers.exercises.ex02_shared_tensor",
    timeout: float = 120.0,
    methods: tuple[str, ...] = ("fork", "spawn"),
    nprocs: int = 4,
    n: int = 1000,
) -> CheckResult:
    """Check exercise 02: ``safe_count(nprocs, n, method)`` counts exactly ``nprocs * n`` in real processes.

    It runs the learner's ``safe_count`` (which starts its own processes) in a child with a deadline,
    under each of ``methods`` this platform has, and reads ``safe_add`` to check that it kept the
    yield between read and write (without it the race rarely shows, and a pass would prove nothing).

    Notebook 02, its closing programming exercise.

    >>> check_ex02("helpers.solutions.ex02_shared_tensor", methods=("fork",)).passed  # doctest: +ELLIPSIS
    checking .../solutions/ex02_shared_tensor.py (takes about 25 s) ...
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        worker = _source(mod.safe_add)
        if "sleep(" not in worker:
            raise Incorrect(
                "keep the time.sleep(0) between the read and the write in safe_add: without it the race is "
                "still there but rarely shows, so the check cannot tell your fix from luck"
            )
        for method in [m for m in methods if m in mp.get_all_start_methods()]:
            try:  # each start method is reported
                report.ok(_count(mod, method, nprocs, n, timeout, worker))
            except Incorrect as wrong:
                report.fail(str(wrong))

    return run_check("ex02", module, ("safe_add", "safe_count"), body, SECONDS)
