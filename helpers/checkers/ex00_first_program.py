"""Exercise 00 (notebook 00): the first program: processes that write into one shared tensor."""

from __future__ import annotations

import importlib
import multiprocessing
import os
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    Incorrect,
    Report,
    importable,
    resolve,
    run_check,
    run_in_child,
    value_of,
)

__all__ = ["check_ex00"]

SECONDS = 25
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""


def _fill_in_child(module_name: str, nprocs: int, method: str) -> dict:
    """Child side of check_ex00: call the learner's ``fill_table``; report the table and this pid."""
    import torch

    table = resolve(importlib.import_module(module_name), "fill_table")(nprocs, method)
    if not isinstance(table, torch.Tensor):
        return {"caller": os.getpid(), "type": type(table).__name__}
    return {"caller": os.getpid(), "shape": list(table.shape), "rows": table.tolist()}


def _row_in_child(module_name: str) -> list:
    """Child side of check_ex00: call the learner's ``fill_row`` on a plain tensor, here."""
    import torch

    table = torch.zeros(3, 2, dtype=torch.int64)
    resolve(importlib.import_module(module_name), "fill_row")(table, 2)
    return [table.tolist(), os.getpid()]


def check_ex00(
    module: str | os.PathLike = "helpers.exercises.ex00_first_program",
    methods: tuple[str, ...] = ("spawn", "fork"),
    timeout: float = 90.0,
) -> CheckResult:
    """Check exercise 00: ``fill_table`` starts one process per row and the rows reach the parent.

    ``fill_row`` is called once in a child on a plain tensor (it must write in place); then the
    learner's ``fill_table(3, method)`` runs, for each of ``methods`` the platform offers, in a child
    of the checker, killed with everything it started after ``timeout`` seconds, and its table is
    read back: row ``rank`` must hold ``rank * rank`` and the id of a process other than the caller,
    a different one in every row. Both methods by default: pickling a tensor for a spawn child moves
    it to shared memory on its own, so only a fork run shows a missing ``share_memory_()``.

    Notebook 00, its closing programming exercise.

    >>> check_ex00("helpers.solutions.ex00_first_program", methods=("fork",)).passed  # doctest: +ELLIPSIS
    checking .../solutions/ex00_first_program.py (takes about 25 s) ...
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        row = run_in_child(__name__, "_row_in_child", (module,), timeout=timeout)
        rows, pid = value_of(row, "fill_row(table, 2)", "fill_row(table, 2) failed: timeout")
        if rows[2] != [4, pid] or rows[:2] != [[0, 0], [0, 0]]:
            raise Incorrect(
                f"fill_row(table, 2) left the table {rows}; expected row 2 to be [4, {pid}] (2 * 2 and "
                "os.getpid()) and the other rows untouched. Write in place: table[rank, 0] = ..., "
                "table[rank, 1] = ... (assigning to a name only rebinds it in this process)"
            )
        report.ok("fill_row writes rank * rank and its process id into its own row, in place")

        for method in [m for m in methods if m in multiprocessing.get_all_start_methods()]:
            report.ok(_check_table(module, method, timeout))

    return run_check("ex00", module, ("fill_row", "fill_table"), body, SECONDS)


def _check_table(module: str, method: str, timeout: float, nprocs: int = 3) -> str:
    """Run ``fill_table(nprocs, method)`` in a child; raise :class:`Incorrect` with what its table shows
    wrong, else say what was verified."""
    outcome = run_in_child(__name__, "_fill_in_child", (module, nprocs, method), timeout=timeout)
    call = f"fill_table(.., {method!r})"
    got = value_of(
        outcome, call, f"{call} did not return within {timeout:.0f} s: did you join without a timeout?"
    )
    if "rows" not in got or got["shape"] != [nprocs, 2]:
        what = got.get("type") or f"a tensor of shape {tuple(got['shape'])}"
        raise Incorrect(f"fill_table({nprocs}) returned {what}: return the ({nprocs}, 2) tensor itself")
    squares = [r[0] for r in got["rows"]]
    pids = [r[1] for r in got["rows"]]
    if all(v == 0 for v in squares + pids):
        hint = (
            " (under spawn it can look right without it: pickling a tensor for a spawn child moves its "
            "storage to shared memory, but a fork child gets a private copy-on-write copy)"
            if method == "fork"
            else ""
        )
        raise Incorrect(
            f"with {method!r} the parent's table is still all zeros: each child wrote into a copy of its "
            "own. Call share_memory_() on the tensor before you start the processes, and join them "
            f"before you return it{hint}"
        )
    if squares != [r * r for r in range(nprocs)]:
        raise Incorrect(
            f"with {method!r} the first column is {squares}; expected {[r * r for r in range(nprocs)]}"
        )
    if got["caller"] in pids:
        raise Incorrect(
            "the rows were written by the process that called fill_table: create "
            "ctx.Process(target=fill_row, args=(table, rank)) and start() it, do not call fill_row yourself"
        )
    if len(set(pids)) != nprocs:
        raise Incorrect(
            f"with {method!r} the rows were written by the processes {pids}: start one process per row"
        )
    return (
        f"{nprocs} {method} processes wrote into one shared tensor: squares {squares}, "
        f"{nprocs} different process ids, none the caller's"
    )
