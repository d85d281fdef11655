"""Exercise 03 (notebook 03): a producer that ends with a sentinel; drain the Queue before joining."""

from __future__ import annotations

import importlib
from types import ModuleType

from helpers.checkers.core import (
    CheckResult,
    _checked,
    _error_line,
    _in_child,
    _raise_if_stub_error,
    _Report,
    _resolve,
)
from helpers.launch import FAST_METHOD

__all__ = ["check_ex03"]


def _drain_producer(module_name: str, n_items: int, item_size: int) -> dict:
    """Run the learner's producer with an in-process queue; report what it put (child side)."""
    import queue

    q: queue.Queue = queue.Queue()
    _resolve(importlib.import_module(module_name), "producer")(q, n_items, item_size)
    items = []
    while not q.empty():
        items.append(q.get_nowait())
    return {"items": items}


def check_ex03(
    module: str = "exercises.ex03_queues",
    timeout: float = 15.0,
    n_items: int = 8,
    item_size: int = 256 * 1024,
) -> CheckResult:
    """Check exercise 03: the producer ends with a sentinel; ``collect`` drains the Queue before joining.

    ``collect`` runs in a child with a ``timeout``: joining before draining deadlocks, and the child
    (with the producer it started) is killed at the deadline.

    Notebook 03, its closing programming exercise.

    >>> check_ex03("solutions.ex03_queues").passed
    True
    """

    def body(mod: ModuleType, report: _Report) -> None:
        expected = [bytes([i % 256]) * item_size for i in range(n_items)]
        small = _in_child(__name__, "_drain_producer", (module, 3, 4), timeout=timeout)
        if small.status != "ok":
            _raise_if_stub_error(small.error)
            report.fail(f"producer(q, 3, 4) did not finish: {_error_line(small.error) or small.status}")
            return
        items = small.value["items"]
        if not items or items[-1] is not None:
            report.fail(
                f"producer(q, 3, 4) put {len(items)} items and no sentinel at the end: put None after the "
                "items, or the consumer cannot know when to stop and waits for ever"
            )
            return
        if items[:-1] != [bytes([i]) * 4 for i in range(3)]:
            report.fail(f"producer(q, 3, 4) put {items[:-1]!r}; expected [b'\\x00\\x00\\x00\\x00', ...]")
            return
        report.ok("producer puts the items, then the sentinel None")
        outcome = _in_child(module, "collect", (n_items, item_size, FAST_METHOD), timeout=timeout)
        if outcome.status == "timeout":
            report.fail(
                f"collect did not finish within {timeout:.0f} s: did you join the producer before reading "
                "all its items? A process that has put items on a Queue cannot exit until they have been "
                "read (its feeder thread waits on the full pipe), so join() waits for ever. Read until the "
                "sentinel first, then join."
            )
        elif outcome.status != "ok":
            _raise_if_stub_error(outcome.error)
            report.fail(f"collect failed: {_error_line(outcome.error)}")
        elif outcome.value != expected:
            got = (
                outcome.value
                if not isinstance(outcome.value, list)
                else f"a list of {len(outcome.value)} items"
            )
            report.fail(
                f"collect returned {got}; expected the {n_items} items in order (without the sentinel)"
            )
        elif outcome.seconds > min(4.0, timeout / 2):
            report.fail(
                f"collect returned the right items but took {outcome.seconds:.1f} s: it waited for a join "
                "timeout. Read until the sentinel first, then join."
            )
        else:
            report.ok(
                f"collect drains {n_items} items of {item_size // 1024} KiB, then joins "
                f"({outcome.seconds:.2f} s)"
            )

    return _checked("ex03", module, ("producer", "collect"), body)
