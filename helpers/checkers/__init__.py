"""Automatic checks for the exercises: run the learner's code in real processes, explain what is wrong.

Each notebook's exercise names a file in ``exercises/`` (worker code must be importable: spawn and
forkserver children re-import it by module and name). ``check_exNN()`` imports (reloads) that
file, runs it in real child processes, bounded by deadlines, and returns a :class:`CheckResult`
whose ``feedback`` names the typical mistake it found. A file still holding the starter's
``raise NotImplementedError`` gets a "not attempted yet" result, never an exception, so a
notebook that calls a checker still runs top to bottom. Nothing is left running afterwards.

Pass another module name to check it instead (the reference solutions live in ``solutions``), or
the path of a file: outside a clone, ``start_exercise("ex03")`` writes the starter next to the
notebook and returns its path, and ``check_ex03(path)`` grades that file (the result names it).

The package is a small core (:mod:`helpers.checkers.core`: the result, the report, running the
learner's code bounded in a child, ``Incorrect`` and ``NotAttempted`` raised to end a check) and one
module per exercise, named like its file in ``exercises/``, that declares its cases as a table and
uses only the core's public names (exercise 09's torchrun workers run the private
``helpers.checkers._ex09_worker``).

Example::

    >>> from helpers.checkers import check_ex08
    >>> result = check_ex08("helpers.solutions.ex08_find_the_hang")
    >>> result.passed
    True
    >>> print(check_ex08().status)  # the untouched starter file
    not attempted yet
"""

from __future__ import annotations

from collections.abc import Callable

from helpers.checkers.core import CheckResult, start_exercise
from helpers.checkers.ex00_first_program import check_ex00
from helpers.checkers.ex01_start_methods import check_ex01
from helpers.checkers.ex02_shared_tensor import check_ex02
from helpers.checkers.ex03_queues import check_ex03
from helpers.checkers.ex04_fork_safe import check_ex04
from helpers.checkers.ex05_hogwild import check_ex05, regression_batch
from helpers.checkers.ex06_ddp_train import check_ex06
from helpers.checkers.ex07_iterable_sharding import check_ex07
from helpers.checkers.ex08_find_the_hang import check_ex08
from helpers.checkers.ex09_node_roles import check_ex09
from helpers.checkers.ex10_diagnose import check_ex10
from helpers.checkers.ex11_gradient_hooks import check_ex11
from helpers.checkers.ex12_zero1_step import check_ex12
from helpers.checkers.ex13_reader_per_worker import check_ex13
from helpers.checkers.ex14_worker_logging import check_ex14

__all__ = [
    "CheckResult",
    "start_exercise",
    "regression_batch",
    "check_ex00",
    "check_ex01",
    "check_ex02",
    "check_ex03",
    "check_ex04",
    "check_ex05",
    "check_ex06",
    "check_ex07",
    "check_ex08",
    "check_ex09",
    "check_ex10",
    "check_ex11",
    "check_ex12",
    "check_ex13",
    "check_ex14",
    "CHECKERS",
]

CHECKERS: dict[str, Callable[..., CheckResult]] = {
    "ex00": check_ex00,
    "ex01": check_ex01,
    "ex02": check_ex02,
    "ex03": check_ex03,
    "ex04": check_ex04,
    "ex05": check_ex05,
    "ex06": check_ex06,
    "ex07": check_ex07,
    "ex08": check_ex08,
    "ex09": check_ex09,
    "ex10": check_ex10,
    "ex11": check_ex11,
    "ex12": check_ex12,
    "ex13": check_ex13,
    "ex14": check_ex14,
}
"""Every checker by exercise id, e.g. ``CHECKERS["ex02"]()`` checks ``exercises/ex02_shared_tensor.py``."""
