"""Exercise 07 (notebook 07): a sharded IterableDataset, each sample once."""

from __future__ import annotations

import os
import warnings
from collections import Counter
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    Incorrect,
    NotAttempted,
    Report,
    first_line,
    importable,
    run_check,
)
from helpers.launch import FAST_METHOD

__all__ = ["check_ex07"]

SECONDS = 3
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""

CASES = ((0, 20, 2), (5, 15, 3), (3, 10, 0))
"""(start, end, num_workers) of each DataLoader the check reads: a start other than 0 (with workers
and without) catches shares counted from 0."""


def _read(mod: ModuleType, start: int, end: int, workers: int, timeout: float) -> list[int]:
    """Every sample a DataLoader with ``workers`` workers reads from ``mod.ShardedRange(start, end)``."""
    from torch.utils.data import DataLoader

    options = {"multiprocessing_context": FAST_METHOD, "timeout": timeout} if workers else {}
    dataset = mod.ShardedRange(start, end)
    try:
        with warnings.catch_warnings():  # "suggested max number of worker" on a 2-core machine
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            return [int(x) for x in DataLoader(dataset, batch_size=None, num_workers=workers, **options)]
    except NotImplementedError:
        raise NotAttempted from None
    except Exception as exc:
        error = f"{type(exc).__name__}: {first_line(str(exc))}"
        if workers == 0 and isinstance(exc, (AttributeError, TypeError)):
            raise Incorrect(
                f"with num_workers=0 it failed ({error}): get_worker_info() returns None in the main "
                "process; then yield the whole range"
            ) from None
        raise Incorrect(f"{workers} workers: {error}") from None


def _judge(got: list[int], start: int, end: int, workers: int) -> str:
    """What is wrong with the samples ``got`` (raised as :class:`Incorrect`), else what was verified."""
    where = f"{workers} workers, ShardedRange({start}, {end})"
    counts = Counter(got)
    missing = sorted(set(range(start, end)) - set(counts))
    extra = sorted(set(counts) - set(range(start, end)))
    if start and extra and set(extra) == set(range(start)):
        raise Incorrect(
            f"{where}: samples {extra} came out, below start: the shares must begin at self.start, "
            "not at 0: range(self.start + id, self.end, num_workers)"
        )
    if got and not missing and not extra and set(counts.values()) == {workers}:
        raise Incorrect(
            f"{where}: every sample came out {workers} times. Each worker has its own copy of the "
            "dataset and iterates all of it: use get_worker_info() (.id, .num_workers) to yield only "
            "this worker's share"
        )
    if missing:
        raise Incorrect(
            f"{where}: samples {missing} never came out (when the length is not a multiple of the "
            "worker count, the last share must take the rest; or interleave: "
            "range(self.start + id, self.end, num_workers))"
        )
    if extra or max(counts.values()) > 1:
        dup = sorted(k for k, c in counts.items() if c > 1)
        raise Incorrect(f"{where}: duplicated {dup}, out of range {extra}")
    return f"{where}: each sample exactly once"


def check_ex07(
    module: str | os.PathLike = "helpers.exercises.ex07_iterable_sharding", timeout: float = 60.0
) -> CheckResult:
    """Check exercise 07: every sample comes out of a multi-worker DataLoader exactly once.

    Notebook 07, its closing programming exercise.

    >>> check_ex07("helpers.solutions.ex07_iterable_sharding").passed
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        for start, end, workers in CASES:
            try:
                report.ok(_judge(_read(mod, start, end, workers, timeout), start, end, workers))
            except Incorrect as wrong:  # every case is reported, not only the first wrong one
                report.fail(str(wrong))

    return run_check("ex07", module, ("ShardedRange.__iter__",), body, SECONDS)
