"""Exercise 01 (notebook 01): a worker that runs under spawn and returns rank-specific results."""

from __future__ import annotations

import os
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    _checked,
    _error_line,
    _raise_if_stub_error,
    _Report,
)
from helpers.launch import NotImportableError, WorkerFailed, launch

__all__ = ["check_ex01"]


def check_ex01(
    module: str = "exercises.ex01_start_methods", timeout: float = 60.0, method: str = "spawn"
) -> CheckResult:
    """Check exercise 01: ``describe(rank, scale)`` runs under spawn and returns rank-specific results.

    ``method`` is the start method of the two children (spawn: the point of the exercise).

    Notebook 01, its closing programming exercise.

    >>> check_ex01("solutions.ex01_start_methods").passed
    True
    """

    def body(mod: ModuleType, report: _Report) -> None:
        scale = 7
        try:
            results = launch(mod.describe, args=(scale,), nprocs=2, method=method, timeout=timeout)
        except NotImportableError as exc:
            report.fail(
                f"launch refused describe before starting any process: a {method} child re-imports the "
                f"worker by module and name, so write it as a top-level `def`. ({exc})"
            )
            return
        except WorkerFailed as exc:
            _raise_if_stub_error(str(exc))
            report.fail(f"a {method} child failed: {_error_line(str(exc))}")
            return
        report.ok(f"describe is importable and runs in 2 {method} children")
        pids = []
        for rank, result in enumerate(results):
            if not isinstance(result, dict) or not {"rank", "value", "pid"} <= set(result):
                report.fail(
                    f"rank {rank} returned {result!r}: return a dict with keys 'rank', 'value', 'pid'"
                )
                continue
            if result["rank"] != rank:
                report.fail(
                    f"rank {rank} reported rank {result['rank']}: return the rank argument you were given"
                )
            if result["value"] != scale * (rank + 1):
                report.fail(
                    f"rank {rank} returned value {result['value']!r}, expected scale * (rank + 1) = "
                    f"{scale * (rank + 1)}: each rank computes its own value from its rank"
                )
            pids.append(result["pid"])
        if os.getpid() in pids:
            report.fail(
                "a child reported the parent's pid: return os.getpid() (this process), not os.getppid() "
                "(its parent), computed inside describe"
            )
        elif len(set(pids)) != len(pids):
            report.fail(
                f"the ranks reported the same pid {pids}: did you return os.getppid() (the parent's) "
                "instead of os.getpid()?"
            )
        elif len(pids) == len(results):
            report.ok(f"2 ranks, 2 different child pids {pids}, values {[r['value'] for r in results]}")

    return _checked("ex01", module, ("describe",), body)
