"""The core of the checkers: the result, the report, and running the learner's code bounded in a child.

The names with a leading underscore are shared by the exercise modules of this package only.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

from helpers.launch import FAST_METHOD, WorkerFailed, launch

__all__ = ["CheckResult"]


@dataclass
class CheckResult:
    """The verdict of one checker: ``passed``, and ``feedback`` lines that say why.

    It prints as a short report (and displays as one in a notebook) that names the file graded
    (``path``, absolute: with two checkouts and one environment, the one imported may not be the
    one you edited).

    >>> print(CheckResult("ex99", passed=False, feedback=["say what to fix"], path="/work/ex99.py"))
    ex99: not right yet
      graded: /work/ex99.py
      - say what to fix
    """

    exercise: str
    passed: bool
    feedback: list[str] = field(default_factory=list)
    attempted: bool = True
    path: str = ""

    @property
    def status(self) -> str:
        """``"passed"``, ``"not attempted yet"`` or ``"not right yet"``.

        >>> CheckResult("ex99", passed=True).status
        'passed'
        """
        if self.passed:
            return "passed"
        return "not right yet" if self.attempted else "not attempted yet"

    def __str__(self) -> str:
        graded = [f"  graded: {self.path}"] if self.path else []
        feedback = [f"  - {line}" for line in self.feedback]
        return "\n".join([f"{self.exercise}: {self.status}", *graded, *feedback])

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython display
        printer.text(str(self))


class _NotAttempted(Exception):
    """Raised inside a check when the learner's code still raises NotImplementedError."""


class _Report:
    """Collects what passed and what failed while a check runs."""

    def __init__(self) -> None:
        self.passed: list[str] = []
        self.problems: list[str] = []

    def ok(self, message: str) -> None:
        self.passed.append(message)

    def fail(self, message: str) -> None:
        if message not in self.problems:
            self.problems.append(message)


def _resolve(module: ModuleType, dotted: str) -> object:
    obj: object = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _is_stub(obj: object) -> bool:
    """True when ``obj``'s source still holds the starter's ``raise NotImplementedError``."""
    try:
        return "raise NotImplementedError" in inspect.getsource(obj)
    except (OSError, TypeError):
        return False


SAY_WHEN_LONGER = 5.0
"""A check expected to take this many seconds or more prints one line when it starts."""


def _path_of(module_name: str) -> str:
    """The absolute path of the file ``module_name`` imports from (without importing it)."""
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return os.path.abspath(module_name.replace(".", "/") + ".py")
    return os.path.abspath(spec.origin)


def _checked(
    exercise: str, module_name: str, names: tuple[str, ...], body: Callable, seconds: float = 0.0
) -> CheckResult:
    """Import (reload) ``module_name``, refuse stubs kindly, run ``body(module, report)``; never raise.

    A check that takes about ``seconds`` (at least :data:`SAY_WHEN_LONGER`) says so before it runs."""
    path = _path_of(module_name)
    not_attempted = CheckResult(
        exercise,
        passed=False,
        attempted=False,
        feedback=[
            f"not attempted yet: edit {path}, replace `raise NotImplementedError` "
            "with your code, save, and run the check again"
        ],
        path=path,
    )
    try:
        module = importlib.reload(importlib.import_module(module_name))
    except Exception as exc:  # a syntax error, a bad import, ... in the learner's file
        error = f"{module_name} does not import: {type(exc).__name__}: {exc}"
        return CheckResult(exercise, False, [error], path=path)
    report = _Report()
    for name in names:
        try:
            obj = _resolve(module, name)
        except AttributeError:
            error = f"{module_name} has no {name}: keep the starter's names"
            return CheckResult(exercise, False, [error], path=path)
        if _is_stub(obj):
            return not_attempted
    if seconds >= SAY_WHEN_LONGER:
        print(f"checking {path} (takes about {seconds:.0f} s) ...", flush=True)
    try:
        body(module, report)
    except _NotAttempted:
        return not_attempted
    except Exception as exc:
        report.fail(f"the check stopped on an error: {type(exc).__name__}: {_first_line(str(exc))}")
    if report.problems:
        return CheckResult(exercise, False, report.problems, path=path)
    return CheckResult(exercise, True, report.passed, path=path)


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def _error_line(text: str) -> str:
    """The ``Type: message`` line of a traceback (its last non-empty line)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text


def _raise_if_stub_error(text: str) -> None:
    if "NotImplementedError" in text:
        raise _NotAttempted


# --- running learner code in a bounded child ------------------------------------------------------


@dataclass
class _Outcome:
    status: str  # "ok" | "raised" | "timeout" | "died"
    value: object = None
    error: str = ""
    seconds: float = 0.0


def _call(rank: int, module_name: str, func_name: str, args: tuple, tmpdir: str) -> object:
    """Child side of :func:`_in_child` (``launch`` passes a rank first): the function, found by name,
    with ``tmpdir`` as the temporary directory of this process and of those it starts."""
    os.environ["TMPDIR"] = tempfile.tempdir = tmpdir
    return _resolve(importlib.import_module(module_name), func_name)(*args)


def _in_child(
    module_name: str, func_name: str, args: tuple = (), *, method: str = FAST_METHOD, timeout: float = 20.0
) -> _Outcome:
    """Run ``module_name.func_name(*args)`` in one child of :func:`helpers.launch.launch`: bounded, and
    past ``timeout`` killed with everything it started. Its processes use a temporary directory of
    the checker's, removed afterwards: one killed at the deadline leaves multiprocessing's folder
    (``pymp-*``) there, not in the learner's."""
    with tempfile.TemporaryDirectory(prefix="check-", ignore_cleanup_errors=True) as tmpdir:
        start = time.monotonic()
        try:
            (value,) = launch(
                _call, (module_name, func_name, args, tmpdir), method=method, timeout=timeout, threads=None
            )
        except WorkerFailed as failed:  # no rank: the deadline passed; an exit code: it died
            status = "timeout" if failed.rank is None else "raised" if failed.exitcode is None else "died"
            return _Outcome(status, error=str(failed), seconds=time.monotonic() - start)
        return _Outcome("ok", value=value, seconds=time.monotonic() - start)


def _returned(outcome: _Outcome, report: _Report, call: str, on_timeout: str) -> bool:
    """Whether ``call`` returned in its child; if not, say why in ``report``: ``on_timeout`` when it
    ran out of time (the likely cause, in the exercise's words), else its error line. A stub still
    raising ``NotImplementedError`` ends the check as "not attempted yet"."""
    if outcome.status == "ok":
        return True
    if outcome.status == "timeout":
        report.fail(on_timeout)
    else:
        _raise_if_stub_error(outcome.error)
        report.fail(f"{call} failed: {_error_line(outcome.error) or outcome.status}")
    return False
