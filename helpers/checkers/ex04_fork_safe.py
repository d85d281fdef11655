"""Exercise 04 (notebook 04): a worker that survives fork from a parent that ran parallel ops."""

from __future__ import annotations

import importlib
import math
import multiprocessing as mp
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    _checked,
    _error_line,
    _in_child,
    _raise_if_stub_error,
    _Report,
    _resolve,
)

__all__ = ["check_ex04"]


def _call_and_count_threads(module_name: str, func_name: str, args: tuple) -> tuple[object, int]:
    """Child side of check_ex04: the worker's value and the torch thread count it left behind."""
    import torch

    value = _resolve(importlib.import_module(module_name), func_name)(*args)
    return value, torch.get_num_threads()


def check_ex04(
    module: str = "exercises.ex04_fork_safe", timeout: float = 15.0, size: int = 4_000_000
) -> CheckResult:
    """Check exercise 04: the worker survives a fork from a parent that already ran parallel ops.

    The parent (this process) first runs a multi-threaded op on at least 2 threads; the worker then
    runs in a fork child with a ``timeout``. With GNU OpenMP, a worker that does not limit its
    threads first hangs and is killed at the deadline.

    Notebook 04, its closing programming exercise.

    >>> check_ex04("solutions.ex04_fork_safe").passed
    True
    """
    import torch

    def body(mod: ModuleType, report: _Report) -> None:
        if "fork" not in mp.get_all_start_methods():
            report.ok("fork is not available on this platform, so the hazard cannot occur here")
            return
        threads = torch.get_num_threads()
        torch.set_num_threads(max(2, threads))
        try:
            torch.randn(size, dtype=torch.float64).float()  # the parent has now used its OpenMP pool
            outcome = _in_child(
                __name__,
                "_call_and_count_threads",
                (module, "fork_safe_sum", (size,)),
                method="fork",
                timeout=timeout,
            )
        finally:
            torch.set_num_threads(threads)
        if outcome.status == "timeout":
            report.fail(
                f"your worker hung in the fork child (killed after {timeout:.0f} s): the parent had already "
                "run a multi-threaded op, and GNU OpenMP's thread pool does not survive fork. Call "
                "torch.set_num_threads(1) at the start of the worker, before its first torch op."
            )
            return
        if outcome.status != "ok":
            _raise_if_stub_error(outcome.error)
            report.fail(f"the worker failed: {_error_line(outcome.error)}")
            return
        value, child_threads = outcome.value
        if not isinstance(value, float) or not math.isfinite(value):
            report.fail(f"fork_safe_sum returned {value!r}: return a finite Python float (float(...sum()))")
        elif child_threads != 1:
            report.fail(
                f"it finished here, but the child still used {child_threads} threads: with GNU OpenMP it "
                "hangs. Call torch.set_num_threads(1) before the first torch op."
            )
        else:
            report.ok(f"the fork child set 1 thread and finished in {outcome.seconds:.2f} s")

    return _checked("ex04", module, ("fork_safe_sum",), body)
