"""The core of the checkers: the result, the report, and running the learner's code bounded in a child.

An exercise module declares its cases as data and writes one ``body(module, report)``:
:func:`run_check` imports the learner's file, refuses untouched starters kindly, and runs the body;
the body calls ``report.ok(...)`` for what it verified, ``report.fail(...)`` for a problem after
which checking goes on, and raises :class:`Incorrect` for one that ends the check (or
:class:`NotAttempted` where the learner's code still raises ``NotImplementedError``). The
learner's functions run in a child of :func:`run_in_child`, killed at a deadline with everything
they started; :func:`value_of` turns its :class:`Outcome` into the value or the feedback.

>>> def body(module, report):
...     if module.diagnose("OSError: [Errno 24] Too many open files") != "too_many_open_files":
...         raise Incorrect("errno 24 is too_many_open_files")
...     report.ok("errno 24 named")
>>> print(run_check("ex99", "helpers.solutions.ex10_diagnose", ("diagnose",), body).status)
passed
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from types import ModuleType

from helpers.launch import FAST_METHOD, WorkerFailed, launch
from helpers.resources import checkout_root

__all__ = [
    "CheckResult",
    "Report",
    "Incorrect",
    "NotAttempted",
    "run_check",
    "run_in_child",
    "value_of",
    "saved_by_launch",
    "resolve",
    "is_stub",
    "first_line",
    "error_line",
    "raise_if_stub_error",
    "start_exercise",
    "importable",
]


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


class NotAttempted(Exception):
    """Raised inside a check when the learner's code still raises NotImplementedError.

    >>> def body(module, report):
    ...     raise_if_stub_error("NotImplementedError: exercise 99: write sqrt")
    >>> run_check("ex99", "helpers.solutions.ex10_diagnose", (), body).status
    'not attempted yet'
    """


class Incorrect(Exception):
    """Raised inside a check with the feedback line that ends it: "not right yet", and why.

    >>> def body(module, report):
    ...     raise Incorrect("return the total as an int")
    >>> run_check("ex99", "helpers.solutions.ex10_diagnose", (), body).feedback
    ['return the total as an int']
    """


class Report:
    """Collects what a running check verified (``ok``) and the problems it found (``fail``)."""

    def __init__(self) -> None:
        self.passed: list[str] = []
        self.problems: list[str] = []

    def ok(self, message: str) -> None:
        """Record what was verified (a pass lists these).

        >>> report = Report()
        >>> report.ok("3 ranks ran at the same time"); report.passed
        ['3 ranks ran at the same time']
        """
        self.passed.append(message)

    def fail(self, message: str) -> None:
        """Record a problem and go on checking (raise :class:`Incorrect` to stop instead); once each.

        >>> report = Report()
        >>> report.fail("lost updates"); report.fail("lost updates"); report.problems
        ['lost updates']
        """
        if message not in self.problems:
            self.problems.append(message)


def resolve(module: ModuleType, dotted: str) -> object:
    """The object ``dotted`` names in ``module`` (``"Class.method"`` too).

    >>> import math
    >>> resolve(math, "sqrt")(9.0)
    3.0
    """
    obj: object = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def is_stub(obj: object) -> bool:
    """True when ``obj``'s source still holds the starter's ``raise NotImplementedError``.

    >>> import json
    >>> is_stub(json.dumps)
    False
    """
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


def _import_problem(module_name: str, names: tuple[str, ...]) -> tuple[ModuleType | None, str | None]:
    """(the reloaded module, None); (None, what is wrong); or (None, None) for an untouched starter."""
    try:
        module = importlib.reload(importlib.import_module(module_name))
    except Exception as exc:  # a syntax error, a bad import, ... in the learner's file
        return None, f"{module_name} does not import: {type(exc).__name__}: {exc}"
    for name in names:
        try:
            obj = resolve(module, name)
        except AttributeError:
            return None, f"{module_name} has no {name}: keep the starter's names"
        if is_stub(obj):
            return None, None
    return module, None


def run_check(
    exercise: str, module_name: str, names: tuple[str, ...], body: Callable, seconds: float = 0.0
) -> CheckResult:
    """Import (reload) ``module_name``, refuse stubs kindly, run ``body(module, report)``; never raise.

    ``names`` are what the starter asks for (an untouched one means "not attempted yet"). A check
    that takes about ``seconds``, at least :data:`SAY_WHEN_LONGER`, says so before it runs.

    >>> def body(module, report):
    ...     report.ok(f"a bus error is {module.diagnose('Bus error')!r}")
    >>> print(run_check("ex99", "helpers.solutions.ex10_diagnose", ("diagnose",), body))  # doctest: +ELLIPSIS
    ex99: passed
      graded: .../solutions/ex10_diagnose.py
      - a bus error is 'shm_full'
    """
    path = _path_of(module_name)
    module, problem = _import_problem(module_name, names)
    if problem:
        return CheckResult(exercise, False, [problem], path=path)
    report = Report()
    try:
        if module is None:
            raise NotAttempted
        if seconds >= SAY_WHEN_LONGER:
            print(f"checking {path} (takes about {seconds:.0f} s) ...", flush=True)
        body(module, report)
    except NotAttempted:
        feedback = f"not attempted yet: edit {path}, replace `raise NotImplementedError` with your code, "
        return CheckResult(exercise, False, [feedback + "save, and run the check again"], False, path)
    except Incorrect as exc:
        report.fail(str(exc))
    except Exception as exc:
        report.fail(f"the check stopped on an error: {type(exc).__name__}: {first_line(str(exc))}")
    if report.problems:
        return CheckResult(exercise, False, report.problems, path=path)
    return CheckResult(exercise, True, report.passed, path=path)


def first_line(text: str) -> str:
    r"""The first non-empty line of ``text``.

    >>> first_line("\n  boom\n  where")
    'boom'
    """
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def error_line(text: str) -> str:
    r"""The ``Type: message`` line of a traceback (its last non-empty line).

    >>> error_line("Traceback (most recent call last):\n  ...\nValueError: bad lr\n")
    'ValueError: bad lr'
    """
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text


def raise_if_stub_error(text: str) -> None:
    """Raise :class:`NotAttempted` when an error text is the starter's ``NotImplementedError``.

    >>> raise_if_stub_error("ValueError: bad lr")  # any other error: nothing happens
    >>> raise_if_stub_error("NotImplementedError: exercise 02: write safe_add")
    Traceback (most recent call last):
    helpers.checkers.core.NotAttempted
    """
    if "NotImplementedError" in text:
        raise NotAttempted


# --- the learner's file: in the clone, or written next to the notebook ------------------------------


def start_exercise(exercise: str, folder: str | os.PathLike | None = None) -> Path:
    """The file to edit for ``exercise`` (``"ex03"``): pass it to the checker, ``check_ex03(path)``.

    In a clone of the repository it is the clone's ``exercises/exNN_*.py`` (nothing is written).
    Where the package is installed from a wheel, the starter is copied into ``folder`` (default: the
    working directory, a notebook's own folder) unless a file of that name is already there: a
    learner's work is never overwritten. Each notebook's exercise cell calls it.

    >>> start_exercise("ex10").relative_to(checkout_root()).as_posix()  # in the clone
    'exercises/ex10_diagnose.py'
    """
    starters = [
        item
        for item in files("helpers.exercises").iterdir()
        if item.name.endswith(".py") and item.name.removesuffix(".py").startswith(exercise)
    ]
    if len(starters) != 1:
        raise ValueError(f"{exercise!r} names {len(starters)} exercise files: use its id, e.g. 'ex03'")
    if folder is None and checkout_root() is not None:
        return Path(str(starters[0])).resolve()
    target = Path(folder if folder is not None else os.getcwd()).resolve() / starters[0].name
    if not target.exists():
        target.write_text(starters[0].read_text())
        print(f"wrote the starter {target}: edit it, save, and run the check again")
    return target


def importable(module: str | os.PathLike) -> str:
    """The module name a checker imports for ``module``: a module name as it is; the path of a ``.py``
    file (:func:`start_exercise`'s) made importable here and in the processes a check starts (they
    inherit ``sys.path``) by putting its folder first on ``sys.path`` where it is not found already.

    >>> importable("helpers.solutions.ex10_diagnose")
    'helpers.solutions.ex10_diagnose'
    >>> importable(checkout_root() / "exercises" / "ex10_diagnose.py")
    'helpers.exercises.ex10_diagnose'
    """
    if not os.fspath(module).endswith(".py"):
        return os.fspath(module)
    path = Path(module).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: start_exercise('exNN') writes the starter")
    package = (path.parent / "__init__.py").is_file()
    name = f"{path.parent.name}.{path.stem}" if package else path.stem
    if package and path.parent.name in ("exercises", "solutions"):  # the package's own: any process finds it
        with contextlib.suppress(ImportError, ValueError):
            installed = importlib.util.find_spec(f"helpers.{name}")
            if installed is not None and Path(installed.origin or "").resolve() == path:
                return f"helpers.{name}"
    folder = str(path.parent.parent if package else path.parent)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if (spec is None or Path(spec.origin or "").resolve() != path) and folder not in sys.path:
        sys.path.insert(0, folder)
    return name


# --- running learner code in a bounded child ------------------------------------------------------


@dataclass
class Outcome:
    """How a call in a child ended: ``status`` "ok", "raised", "timeout" or "died"; its value or error."""

    status: str
    value: object = None
    error: str = ""
    seconds: float = 0.0


def _call(rank: int, module_name: str, func_name: str, args: tuple, tmpdir: str) -> object:
    """Child side of :func:`run_in_child` (``launch`` passes a rank first): the function, found by
    name, with ``tmpdir`` as the temporary directory of this process and of those it starts."""
    os.environ["TMPDIR"] = tempfile.tempdir = tmpdir
    return resolve(importlib.import_module(module_name), func_name)(*args)


def run_in_child(
    module_name: str, func_name: str, args: tuple = (), *, method: str = FAST_METHOD, timeout: float = 20.0
) -> Outcome:
    """Run ``module_name.func_name(*args)`` in one child of :func:`helpers.launch.launch`: bounded, and
    past ``timeout`` killed with everything it started. Its processes use a temporary directory of
    the checker's, removed afterwards: one killed at the deadline leaves multiprocessing's folder
    (``pymp-*``) there, not in the learner's.

    >>> run_in_child("math", "sqrt", (16.0,), timeout=60).value
    4.0
    """
    with tempfile.TemporaryDirectory(prefix="check-", ignore_cleanup_errors=True) as tmpdir:
        start = time.monotonic()
        try:
            (value,) = launch(
                _call, (module_name, func_name, args, tmpdir), method=method, timeout=timeout, threads=None
            )
        except WorkerFailed as failed:  # no rank: the deadline passed; an exit code: it died
            status = "timeout" if failed.rank is None else "raised" if failed.exitcode is None else "died"
            return Outcome(status, error=str(failed), seconds=time.monotonic() - start)
        return Outcome("ok", value=value, seconds=time.monotonic() - start)


def value_of(outcome: Outcome, call: str, on_timeout: str) -> object:
    """What ``call`` returned in its child; else raise :class:`Incorrect` saying why: ``on_timeout``
    when it ran out of time (the likely cause, in the exercise's words), else its error line. A stub
    still raising ``NotImplementedError`` raises :class:`NotAttempted`.

    >>> value_of(Outcome("timeout"), "consume(3, 4)", "did you join before draining?")
    Traceback (most recent call last):
    helpers.checkers.core.Incorrect: did you join before draining?
    """
    if outcome.status == "ok":
        return outcome.value
    if outcome.status == "timeout":
        raise Incorrect(on_timeout)
    raise_if_stub_error(outcome.error)
    raise Incorrect(f"{call} failed: {error_line(outcome.error) or outcome.status}")


def saved_by_launch(
    module_name: str, world_size: int, timeout: float, on_hang: str, nothing_saved: str
) -> dict:
    """Run the learner's ``launch(world_size, path)`` in a child with a deadline (:func:`run_in_child`)
    and return what its rank 0 saved to ``path`` (``torch.load``, weights only). Raises
    :class:`Incorrect`: with ``on_hang`` (the likely cause, in the exercise's words) when it did not
    finish, with ``nothing_saved`` when it saved nothing.

    >>> saved_by_launch("helpers.solutions.ex06_ddp_train", 2, 120, "", "")["linear.weight"].shape  # doctest: +SKIP
    torch.Size([10, 64])
    """
    import torch

    with tempfile.TemporaryDirectory(prefix="check-launch-") as folder:
        path = os.path.join(folder, "saved.pt")
        outcome = run_in_child(module_name, "launch", (world_size, path), method=FAST_METHOD, timeout=timeout)
        if outcome.status in ("timeout", "died"):
            raise Incorrect(
                f"launch({world_size}, path) did not finish within {timeout:.0f} s ({outcome.status}): {on_hang}"
            )
        value_of(outcome, f"launch({world_size}, path)", "")
        if not os.path.exists(path):
            raise Incorrect(nothing_saved)
        return torch.load(path, weights_only=True)
