"""Exercise 08 (notebook 08): explain the exit codes of real processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
from types import ModuleType

from helpers.checkers.core import (
    FORK,
    CheckResult,
    _checked,
    _NotAttempted,
    _Report,
)
from helpers.processes import running

__all__ = ["check_ex08"]


def _exit_with(code: int) -> None:
    sys.exit(code)


def _raise_quietly() -> None:
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the child exits right away)
    raise RuntimeError("an uncaught exception in a child")


def _kill_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(30)


def check_ex08(module: str = "exercises.ex08_exit_codes", timeout: float = 30.0) -> CheckResult:
    """Check exercise 08: ``explain_exitcode`` describes the exit codes of real processes correctly.

    Notebook 08, its closing programming exercise.

    >>> check_ex08("solutions.ex08_exit_codes").passed
    True
    """

    def body(mod: ModuleType, report: _Report) -> None:
        ctx = mp.get_context(FORK)
        cases = [
            ("a child that returned normally", ctx.Process(target=_exit_with, args=(0,)), "ok"),
            ("a child that called sys.exit(3)", ctx.Process(target=_exit_with, args=(3,)), "error 3"),
            ("a child that raised an exception", ctx.Process(target=_raise_quietly), "error 1"),
            (
                "a child killed by SIGKILL",
                ctx.Process(target=_kill_self, args=(signal.SIGKILL,)),
                "killed by SIGKILL",
            ),
            (
                "a child stopped with terminate()",
                ctx.Process(target=time.sleep, args=(30,)),
                "killed by SIGTERM",
            ),
        ]
        procs = [p for _, p, _ in cases]
        with running(procs, timeout=timeout):
            running_code = procs[-1].exitcode  # None: still running
            procs[-1].terminate()
            for p in procs:
                p.join(timeout)
        hints = {
            "running": "a process that has not finished has exitcode None: test `exitcode is None` first "
            "(`not exitcode` is also true for 0)",
            "ok": "exit code 0 means success",
            "error": "a positive code n is the child's own exit status: 'error n' "
            "(an uncaught exception gives 1)",
            "killed": "a negative code -n means the child was killed by signal n: signal.Signals(n).name",
        }
        checks = [("a child still running", running_code, "running")]
        checks += [(what, p.exitcode, expected) for (what, p, expected) in cases]
        for what, code, expected in checks:
            try:
                answer = mod.explain_exitcode(code)
            except NotImplementedError:
                raise _NotAttempted from None
            except Exception as exc:
                answer = f"<raised {type(exc).__name__}: {exc}>"
            if answer == expected:
                report.ok(f"{what}: exitcode {code} -> {answer!r}")
            else:
                report.fail(
                    f"{what} has exitcode {code}: you said {answer!r}, expected {expected!r}. "
                    f"{hints[expected.split()[0]]}"
                )

    return _checked("ex08", module, ("explain_exitcode",), body)
