"""Exercise 07 (notebook 07): a sharded IterableDataset, each sample once."""

from __future__ import annotations

import warnings
from collections import Counter
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    _checked,
    _first_line,
    _NotAttempted,
    _Report,
)
from helpers.launch import FAST_METHOD

__all__ = ["check_ex07"]

SECONDS = 3
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""

CASES = ((0, 20, 2), (5, 15, 3), (3, 10, 0))
"""(start, end, num_workers) of each DataLoader the check reads: a start other than 0 (with workers
and without) catches shares counted from 0."""


def check_ex07(module: str = "exercises.ex07_iterable_sharding", timeout: float = 60.0) -> CheckResult:
    """Check exercise 07: every sample comes out of a multi-worker DataLoader exactly once.

    Notebook 07, its closing programming exercise.

    >>> check_ex07("solutions.ex07_iterable_sharding").passed
    True
    """
    from torch.utils.data import DataLoader

    def body(mod: ModuleType, report: _Report) -> None:
        for start, end, workers in CASES:
            dataset = mod.ShardedRange(start, end)
            where = f"{workers} workers, ShardedRange({start}, {end})"
            options = {"multiprocessing_context": FAST_METHOD, "timeout": timeout} if workers else {}
            try:
                with warnings.catch_warnings():  # "suggested max number of worker" on a 2-core machine
                    warnings.filterwarnings("ignore", message="This DataLoader will create")
                    got = [
                        int(x) for x in DataLoader(dataset, batch_size=None, num_workers=workers, **options)
                    ]
            except NotImplementedError:
                raise _NotAttempted from None
            except Exception as exc:
                if workers == 0 and isinstance(exc, (AttributeError, TypeError)):
                    report.fail(
                        f"with num_workers=0 it failed ({type(exc).__name__}: {_first_line(str(exc))}): "
                        "get_worker_info() returns None in the main process; then yield the whole range"
                    )
                else:
                    report.fail(f"{workers} workers: {type(exc).__name__}: {_first_line(str(exc))}")
                continue
            counts = Counter(got)
            missing = sorted(set(range(start, end)) - set(counts))
            extra = sorted(set(counts) - set(range(start, end)))
            if start and extra and set(extra) == set(range(start)):
                report.fail(
                    f"{where}: samples {extra} came out, below start: the shares must begin at self.start, "
                    "not at 0: range(self.start + id, self.end, num_workers)"
                )
            elif got and not missing and not extra and set(counts.values()) == {workers}:
                report.fail(
                    f"{where}: every sample came out {workers} times. Each worker "
                    "has its own copy of the dataset and iterates all of it: use get_worker_info() "
                    "(.id, .num_workers) to yield only this worker's share"
                )
            elif missing:
                report.fail(
                    f"{where}: samples {missing} never came out (when the length is not "
                    "a multiple of the worker count, the last share must take the rest; or interleave: "
                    "range(self.start + id, self.end, num_workers))"
                )
            elif extra or max(counts.values()) > 1:
                dup = sorted(k for k, c in counts.items() if c > 1)
                report.fail(f"{where}: duplicated {dup}, out of range {extra}")
            else:
                report.ok(f"{where}: each sample exactly once")

    return _checked("ex07", module, ("ShardedRange.__iter__",), body, SECONDS)
