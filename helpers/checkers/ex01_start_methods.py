"""Exercise 01 (notebook 01): the parent side: start N processes, join them with a timeout, exit codes."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path
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

__all__ = ["check_ex01"]

SECONDS = 15
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""

STUCK_AFTER = 3.0  # the join timeout run_workers gets in the case with a rank that never returns


class _RanInParent(RuntimeError):
    """A target ran in the process that called ``run_workers``: no process was started for it."""


def _arrive(rank: int, directory: str, caller: int) -> None:
    if os.getpid() == caller:
        raise _RanInParent(f"rank {rank} ran in the calling process")
    part = Path(directory, f"{rank}.part")
    part.write_text(str(os.getpid()))
    part.rename(Path(directory, str(rank)))  # atomic: a reader never sees half a pid


def _meet(rank: int, directory: str, caller: int, nprocs: int, wait: float) -> None:
    """Target: write this rank's pid, then wait for every other rank's (they must run together)."""
    _arrive(rank, directory, caller)
    deadline = time.monotonic() + wait
    while not all(Path(directory, str(r)).exists() for r in range(nprocs)):
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.05)


def _exit_with(rank: int, directory: str, caller: int, codes: tuple[int, ...]) -> None:
    """Target: ``sys.exit(codes[rank])`` (0 is a plain return)."""
    _arrive(rank, directory, caller)
    if codes[rank]:
        sys.exit(codes[rank])


def _stuck_on(rank: int, directory: str, caller: int, bad_rank: int) -> None:
    """Target: ``bad_rank`` never returns on its own."""
    _arrive(rank, directory, caller)
    if rank == bad_rank:
        time.sleep(600)


def _run_case(module_name: str, case: str, method: str, timeout: float, wait: float) -> dict:
    """Child side: call the learner's ``run_workers`` on one case; report codes, pids and seconds."""
    run_workers = resolve(importlib.import_module(module_name), "run_workers")
    caller = os.getpid()
    with tempfile.TemporaryDirectory(prefix="ex01-") as directory:
        cases = {
            "meet": (_meet, (directory, caller, 3, wait), 3, 2 * wait),
            "codes": (_exit_with, (directory, caller, (0, 1, 7)), 3, 2 * wait),
            "stuck": (_stuck_on, (directory, caller, 1), 2, STUCK_AFTER),
        }
        target, args, nprocs, join_timeout = cases[case]
        start = time.monotonic()
        try:
            codes = run_workers(target, args, nprocs, method, join_timeout)
        except _RanInParent as error:
            return {"ran_in_parent": str(error)}
        seconds = time.monotonic() - start
        pids = {}
        for rank in range(nprocs):
            with contextlib.suppress(OSError, ValueError):
                pids[rank] = int(Path(directory, str(rank)).read_text())
    return {"codes": codes, "pids": pids, "caller": caller, "seconds": seconds, "nprocs": nprocs}


def _run(module: str, case: str, method: str, timeout: float, wait: float) -> dict:
    """The learner's ``run_workers`` on one case, in a child of the checker with a deadline."""
    outcome = run_in_child(__name__, "_run_case", (module, case, method, timeout, wait), timeout=timeout)
    hint = (
        f"run_workers did not return within {timeout:.0f} s: did you join without a timeout? "
        "A process that never ends makes join() wait for ever; use join(timeout=timeout), then "
        "terminate() what is still running"
    )
    result = value_of(outcome, "run_workers", hint)
    if "ran_in_parent" in result:
        raise Incorrect(
            "the target ran in the process that called run_workers: create ctx.Process(target=target, "
            "args=(rank, *args)) and start() it, do not call target yourself"
        )
    return result


def _judge_meet(meet: dict, method: str, wait: float) -> str:
    """3 ranks that must all run at the same time: started first, joined after."""
    codes, pids = meet["codes"], meet["pids"]
    if not isinstance(codes, list) or len(codes) != 3:
        raise Incorrect(
            f"run_workers(target, args, 3, ...) returned {codes!r}: return a list of the 3 exit codes"
        )
    if sorted(pids) != [0, 1, 2]:
        raise Incorrect(
            f"only ranks {sorted(pids)} of 0, 1, 2 ran: start one process per rank, args=(rank, *args)"
        )
    if len(set(pids.values())) != 3 or meet["caller"] in pids.values():
        raise Incorrect(f"the ranks ran in processes {pids}: each rank needs a process of its own")
    if codes != [0, 0, 0]:
        late = [rank for rank, code in enumerate(codes) if code != 0]
        raise Incorrect(
            f"exit codes {codes}: ranks {late} waited {wait:.0f} s and never saw all 3 ranks running "
            "at the same time. Start every process first, then join them (a join right after each "
            "start runs them one after another)"
        )
    return f"3 ranks ran at the same time in 3 processes of their own ({method}), exit codes {codes}"


def _judge_codes(exits: dict, method: str, wait: float) -> str:
    """Ranks that return, ``sys.exit(1)`` and ``sys.exit(7)``: their exit codes in rank order."""
    if exits["codes"] != [0, 1, 7]:
        raise Incorrect(
            f"ranks that return, sys.exit(1) and sys.exit(7) gave {exits['codes']}; expected [0, 1, 7]: "
            "return p.exitcode for each process, in rank order, after joining it"
        )
    return "exit codes in rank order: [0, 1, 7] for return, sys.exit(1), sys.exit(7)"


def _judge_stuck(stuck: dict, method: str, wait: float) -> str:
    """A rank that never returns: terminated after the join timeout."""
    code = stuck["codes"][1] if isinstance(stuck["codes"], list) and len(stuck["codes"]) == 2 else "?"
    if code is None:
        raise Incorrect(
            "the stuck rank's exit code is None: it was still running when run_workers returned. "
            "After join(timeout=...), terminate() a process whose exitcode is None, then join it again"
        )
    if not isinstance(code, int) or code >= 0:
        raise Incorrect(f"the stuck rank's exit code is {code!r}; terminate() it, which gives -15 (SIGTERM)")
    return (
        f"a stuck rank is terminated after its join timeout (exit code {code}), "
        f"run_workers returned in {stuck['seconds']:.1f} s"
    )


CASES = (("meet", _judge_meet), ("codes", _judge_codes), ("stuck", _judge_stuck))
"""Each case :func:`_run_case` sets up, in order, and the function that judges its result."""


def check_ex01(
    module: str | os.PathLike = "helpers.exercises.ex01_start_methods",
    timeout: float = 90.0,
    method: str = "spawn",
    wait: float = 20.0,
) -> CheckResult:
    """Check exercise 01: ``run_workers`` starts every process, joins each with a timeout, returns exit codes.

    Three cases, each in real processes started by the learner's code, which runs in a child of the
    checker, killed with everything it started after ``timeout`` seconds: 3 ranks that must all be
    running at the same time (each waits up to ``wait`` s for the others); 3 ranks that return,
    ``sys.exit(1)`` and ``sys.exit(7)``; 2 ranks of which one never returns (``run_workers`` gets
    ``timeout=3``). ``method`` is the start method the learner's code is asked to use.

    Notebook 01, its closing programming exercise.

    >>> check_ex01("helpers.solutions.ex01_start_methods").passed  # doctest: +ELLIPSIS
    checking .../solutions/ex01_start_methods.py (takes about 15 s) ...
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        for case, judge in CASES:
            report.ok(judge(_run(module, case, method, timeout, wait), method, wait))

    return run_check("ex01", module, ("run_workers",), body, SECONDS)
