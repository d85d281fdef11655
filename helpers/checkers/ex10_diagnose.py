"""Exercise 10 (notebook 10): from an error message as a user pastes it, the case it belongs to."""

from __future__ import annotations

import os
import re
from types import ModuleType

from helpers.checkers.core import CheckResult, NotAttempted, Report, importable, run_check
from helpers.field_guide import CASES, ERROR_INDEX
from helpers.section_links import as_plain_text

__all__ = ["check_ex10"]

SECONDS = 0
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""

_RAISED = (
    "torch.multiprocessing.spawn.ProcessRaisedException: \n\n-- Process {rank} terminated with the following "
    'error:\nTraceback (most recent call last):\n  File "train.py", line 41, in train\n    {line}\n{error}'
)


def _varied(message: str) -> str:
    """The same message with other numbers (ports, pids, ranks and timeouts vary between runs)."""
    return re.sub(r"\d+", lambda m: str(int(m.group()) + 7), message)


_MESSAGES: list[tuple[str, str, str]] = [
    *((entry.message, entry.case, "the index's own words") for entry in ERROR_INDEX),
    *((_varied(entry.message), entry.case, "other numbers") for entry in ERROR_INDEX),
    (
        _RAISED.format(
            rank=1,
            line="loss.backward()",
            error="RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
            "Timed out waiting 1800000ms for recv operation to complete",
        ),
        "uneven_inputs",
        "wrapped by mp.spawn",
    ),
    (
        _RAISED.format(
            rank=0,
            line="dist.init_process_group('gloo', url, rank=rank, world_size=2)",
            error="torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
            "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address "
            "already in use",
        ),
        "port_in_use",
        "wrapped by mp.spawn",
    ),
    (
        _RAISED.format(
            rank=1, line="raise ValueError(f'bad learning rate {lr}')", error="ValueError: bad lr"
        ),
        "worker_raised",
        "wrapped by mp.spawn",
    ),
]
"""(message, case, how it was made) for every message the checker tries."""


def check_ex10(module: str | os.PathLike = "helpers.exercises.ex10_diagnose") -> CheckResult:
    """Check exercise 10: ``diagnose(message)`` names the case of every message (notebook 10's exercise).

    >>> check_ex10("helpers.solutions.ex10_diagnose").passed
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        right: dict[str, int] = {}  # how -> messages named right (a pass says what was checked, briefly)
        for message, case, how in _MESSAGES:
            try:
                answer = mod.diagnose(message)
            except NotImplementedError:
                raise NotAttempted from None
            last = message.strip().splitlines()[-1]
            if answer not in CASES:
                report.fail(f"{answer!r} is not one of the cases {sorted(CASES)}")
            elif answer == case:
                right[how] = right.get(how, 0) + 1
            elif how == "other numbers":
                report.fail(f"{last[:80]!r}: you said {answer!r}; ports, pids, ranks and timeouts vary")
            elif how == "wrapped by mp.spawn":
                report.fail(
                    f"mp.spawn wrapped {last[:60]!r}: you said {answer!r}; read the last line of a "
                    "traceback first, it is the error (the lines above say where it happened)"
                )
            else:
                report.fail(f"{last[:80]!r}: you said {answer!r}; see {as_plain_text(CASES[case])}")
        for how, count in right.items():
            report.ok(f"{count} messages ({how}): each named its case")

    return run_check("ex10", module, ("diagnose",), body, SECONDS)
