"""Exercise 14 (notebook 14): logs from every worker, once each, under fork and spawn."""

from __future__ import annotations

import importlib
import logging
import multiprocessing as mp
import os
import tempfile
from pathlib import Path
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    Incorrect,
    Report,
    importable,
    raise_if_stub_error,
    resolve,
    run_check,
    run_in_child,
    value_of,
)

__all__ = ["check_ex14"]

SECONDS = 4
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""

DEBUG, INFO, WARNING = "a DEBUG detail", "step 1 done", "loss is nan"
RAISED = "configure_worker_logging raised "


def _log_in_worker(module_name: str, queue) -> None:
    """Grandchild: the learner's configuration, one record of each level, then the sentinel."""
    try:
        resolve(importlib.import_module(module_name), "configure_worker_logging")(queue)
        train = logging.getLogger("train")
        train.debug(DEBUG)
        train.info(INFO)
        train.warning(WARNING)
    except Exception as error:
        queue.put(f"{RAISED}{type(error).__name__}: {error}")
    finally:
        queue.put(None)


def _records_under(module_name: str, method: str, log_file: str) -> list[str]:
    """Child side: a parent that configured logging (a file handler, INFO) starts one worker; the
    messages that reached the queue, in order."""
    root = logging.getLogger()
    root.handlers = [logging.FileHandler(log_file)]
    root.setLevel(logging.INFO)
    ctx = mp.get_context(method)
    queue = ctx.Queue()
    worker = ctx.Process(target=_log_in_worker, args=(module_name, queue))
    worker.start()
    messages = []
    while (item := queue.get(timeout=60)) is not None:
        messages.append(item if isinstance(item, str) else getattr(item, "getMessage", lambda: str(item))())
    worker.join(timeout=30)
    return messages


def _judge(method: str, messages: list[str], written: str) -> None:
    """Raise :class:`Incorrect` with what is wrong with one worker's records."""
    raised = [m for m in messages if m.startswith(RAISED)]
    if raised:
        raise_if_stub_error(raised[0])
        raise Incorrect(f"in a {method} worker, {raised[0]}")
    if written.strip() and not messages:
        raise Incorrect(
            f"nothing from a {method} worker reached the queue, and the parent's file handler wrote its records "
            f"({written.strip().splitlines()[0]!r}): logging.basicConfig does nothing when the root logger "
            "already has handlers, as a fork worker's has (inherited), unless it is given force=True. "
            "Or replace them yourself: root.handlers = [QueueHandler(queue)]"
        )
    if written.strip():
        raise Incorrect(
            f"a {method} worker inherits the parent's handlers: its records were also written by the parent's "
            f"file handler ({written.strip().splitlines()[0]!r}). Replace the root logger's handlers "
            "(root.handlers = [QueueHandler(queue)]) rather than adding one"
        )
    if not messages:
        raise Incorrect(
            f"nothing from a {method} worker reached the queue: give the root logger a QueueHandler(queue)"
        )
    formatted = [m for m in messages if m not in (INFO, WARNING, DEBUG) and (INFO in m or WARNING in m)]
    if formatted:
        raise Incorrect(
            f"a {method} worker's records reached the queue already formatted ({formatted[0]!r}, not "
            f"{INFO!r}): its QueueHandler has a formatter (logging.basicConfig gives one to the handlers "
            "it installs), and the parent's listener formats each record again. Give the root logger a "
            "QueueHandler without a formatter: root.handlers = [QueueHandler(queue)]"
        )
    if INFO not in messages:
        start = "a spawn child starts at WARNING" if method != "fork" else "it stayed above INFO"
        raise Incorrect(
            f"a {method} worker dropped its INFO record: the root logger's level is not INFO ({start}); "
            "set it to INFO (root.setLevel(logging.INFO))"
        )
    if messages.count(INFO) > 1:
        raise Incorrect(
            f"each record reached the queue {messages.count(INFO)} times: one QueueHandler, on the root logger"
        )
    if DEBUG in messages:
        raise Incorrect("DEBUG records reached the queue: the level is INFO")


def check_ex14(module: str | os.PathLike = "helpers.exercises.ex14_worker_logging") -> CheckResult:
    """Check exercise 14: ``configure_worker_logging(queue)`` under fork and spawn (notebook 14's exercise).

    >>> check_ex14("helpers.solutions.ex14_worker_logging").passed
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        with tempfile.TemporaryDirectory(prefix="ex14-") as folder:
            for method in [m for m in ("fork", "spawn") if m in mp.get_all_start_methods()]:
                log_file = str(Path(folder, f"{method}.log"))
                outcome = run_in_child(__name__, "_records_under", (module, method, log_file), timeout=90)
                hint = (
                    f"no sentinel from a {method} worker within 90 s: does configure_worker_logging return?"
                )
                messages = value_of(outcome, f"a {method} worker", hint)
                _judge(method, messages, Path(log_file).read_text() if Path(log_file).exists() else "")
                report.ok(
                    f"{method}: INFO and WARNING reached the queue once each, DEBUG did not, nothing else wrote them"
                )

    return run_check("ex14", module, ("configure_worker_logging",), body, SECONDS)
