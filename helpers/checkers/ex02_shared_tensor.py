"""Exercise 02 (notebook 02): an in-place update of a shared tensor reaches the parent."""

from __future__ import annotations

import multiprocessing as mp
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    _checked,
    _error_line,
    _raise_if_stub_error,
    _Report,
)
from helpers.launch import WorkerFailed, launch

__all__ = ["check_ex02"]


def check_ex02(
    module: str = "exercises.ex02_shared_tensor",
    timeout: float = 60.0,
    methods: tuple[str, ...] = ("fork", "spawn"),
) -> CheckResult:
    """Check exercise 02: a worker's in-place update of a shared tensor reaches the parent (fork and spawn).

    ``methods``: the start methods to try, in turn (those this platform lacks are skipped).

    Notebook 02, its closing programming exercise.

    >>> check_ex02("solutions.ex02_shared_tensor").passed
    True
    """
    import torch

    def body(mod: ModuleType, report: _Report) -> None:
        counter = mod.make_counter(4)
        if not isinstance(counter, torch.Tensor) or counter.shape != (4,) or bool(counter.any()):
            report.fail(f"make_counter(4) returned {counter!r}: expected a tensor of 4 zeros")
            return
        for method in [m for m in methods if m in mp.get_all_start_methods()]:
            counter = mod.make_counter(4)
            try:
                launch(mod.add_rank, args=(counter,), nprocs=2, method=method, timeout=timeout)
            except WorkerFailed as exc:
                _raise_if_stub_error(str(exc))
                report.fail(f"{method}: a worker failed: {_error_line(str(exc))}")
                continue
            expected = torch.full((4,), 3.0, dtype=counter.dtype)
            if torch.equal(counter, expected):
                report.ok(f"{method}: the parent sees {counter.tolist()} after ranks 0 and 1 added 1 and 2")
            elif not counter.any() and method == "fork" and not counter.is_shared():
                report.fail(
                    "fork: the parent never saw your update because make_counter's tensor is not in shared "
                    "memory: a fork child writes to its own copy-on-write copy. Return "
                    "torch.zeros(n).share_memory_(). (spawn hides this mistake: pickling a tensor for a "
                    "spawn child moves it to shared memory.)"
                )
            elif not counter.any():
                report.fail(
                    f"{method}: the parent never saw your update: did the worker rebind the tensor "
                    "(counter = counter + ...) instead of writing in place "
                    "(counter += ..., counter.add_(...))?"
                )
            else:
                report.fail(
                    f"{method}: the parent sees {counter.tolist()}, expected {expected.tolist()}: "
                    "rank r adds r + 1 to every element"
                )

    return _checked("ex02", module, ("make_counter", "add_rank"), body)
