"""Exercise 13 (notebook 13): a Dataset that opens its file once per worker, never in ``__init__``."""

from __future__ import annotations

import io
import os
import tempfile
import warnings
from pathlib import Path
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
from helpers.field_guide_workers import write_records
from helpers.launch import FAST_METHOD

__all__ = ["check_ex13"]

SECONDS = 2
"""About how long a passing check takes, in seconds, on an idle 2-core machine."""

COUNT = 30
"""Records in the file the check writes."""

WORKERS = (2, 0)
"""The DataLoaders the check reads with: two workers (forked where the platform can), then none."""


def _open_handles(dataset: object) -> list[str]:
    """The attributes of ``dataset`` that hold an open file (what every forked worker would share)."""
    return [
        name for name, value in vars(dataset).items() if isinstance(value, io.IOBase) and not value.closed
    ]


def _offsets(dataset: object) -> dict[str, int]:
    """The kernel file offset of each open handle of ``dataset`` (shared with every forked child)."""
    return {
        name: os.lseek(getattr(dataset, name).fileno(), 0, os.SEEK_CUR) for name in _open_handles(dataset)
    }


def _read(dataset: object, workers: int, timeout: float) -> list[int]:
    """Every record a DataLoader with ``workers`` workers reads from ``dataset`` (a ``Records``)."""
    from torch.utils.data import DataLoader

    options = {"multiprocessing_context": FAST_METHOD, "timeout": timeout} if workers else {}
    try:
        with warnings.catch_warnings():  # "suggested max number of worker" on a small machine
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            loader = DataLoader(dataset, batch_size=None, num_workers=workers, **options)
            return [int(x) for x in loader]
    except NotImplementedError:
        raise NotAttempted from None
    except Exception as exc:
        raise Incorrect(f"{workers} workers: {type(exc).__name__}: {first_line(str(exc))}") from None


PEEKED = (
    "after the main process read records[0] (print(dataset[0]) before training, a common habit), "
    "the forked workers used the handle it had opened ({why}): a handle opened in the main process "
    "is not None in a forked worker. Compare os.getpid() with the pid that opened it, not the handle "
    "with None"
)


def _check_after_a_peek(mod: ModuleType, path: Path, timeout: float) -> None:
    """The main process reads one record, then forked workers read them all: each must open its own
    handle (the pid rule); a handle inherited from the main process moves its offset."""
    dataset = mod.Records(str(path), COUNT)
    try:
        if dataset[0] != 0:
            raise Incorrect(f"records[0] in the main process returned {dataset[0]!r}, not 0")
        before = _offsets(dataset)
        try:
            got = _read(dataset, WORKERS[0], timeout)
        except Incorrect as error:
            raise Incorrect(PEEKED.format(why=str(error))) from None
        moved = [name for name, at in _offsets(dataset).items() if before.get(name) != at]
        if moved or got != list(range(COUNT)):
            why = (
                f"self.{moved[0]}'s offset moved in the main process" if moved else "records came back wrong"
            )
            raise Incorrect(PEEKED.format(why=why))
    finally:
        for handle in _open_handles(dataset):
            getattr(dataset, handle).close()


def check_ex13(
    module: str | os.PathLike = "helpers.exercises.ex13_reader_per_worker", timeout: float = 60.0
) -> CheckResult:
    """Check exercise 13: no file opened in ``__init__``; every record right with and without workers,
    and when the main process read a record first (each worker opens its own handle: the pid rule).

    Notebook 13, its closing programming exercise.

    >>> check_ex13("helpers.solutions.ex13_reader_per_worker").passed
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        with tempfile.TemporaryDirectory(prefix="ex13-") as folder:
            path = write_records(Path(folder) / "records", COUNT)
            dataset = mod.Records(str(path), COUNT)
            handles = _open_handles(dataset)
            for handle in handles:
                getattr(dataset, handle).close()
            if handles:
                raise Incorrect(
                    f"Records opened its file in __init__ (self.{handles[0]}): every forked worker inherits "
                    "that one handle and its offset. Keep the path in __init__, open on the first read "
                    "in each process (compare os.getpid() with the pid that opened it)"
                )
            report.ok("__init__ keeps the path, opens nothing")
            for workers in WORKERS:
                got = _read(mod.Records(str(path), COUNT), workers, timeout)
                if got != list(range(COUNT)):
                    wrong = [i for i, g in enumerate(got) if g != i][:5]
                    raise Incorrect(f"{workers} workers: records {wrong} came back wrong (got {got[:8]}...)")
                report.ok(f"{workers} workers: all {COUNT} records right")
            if FAST_METHOD == "fork":  # under spawn a Dataset holding an open file does not pickle at all
                _check_after_a_peek(mod, path, timeout)
                report.ok(
                    f"the main process read records[0] first, then {WORKERS[0]} workers: each opened its own"
                )

    return run_check("ex13", module, ("Records.__getitem__",), body, SECONDS)
