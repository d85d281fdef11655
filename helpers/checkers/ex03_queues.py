"""Exercise 03 (notebook 03): producers that end with a sentinel each; a consumer that drains, then joins."""

from __future__ import annotations

import importlib
import os
import queue
import time
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
from helpers.launch import FAST_METHOD

__all__ = ["check_ex03"]

SECONDS = 20
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""


def _probe_producer(module_name: str, method: str, n_items: int, wait: float) -> dict:
    """Child side of check_ex03: run the learner's producer (rank 1) against a consumer written here."""
    import torch
    import torch.multiprocessing as mp

    producer = resolve(importlib.import_module(module_name), "producer")
    ctx = mp.get_context(method)
    q, done = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=producer, args=(1, q, done, n_items))
    proc.start()
    report: dict = {"items": [], "sentinel": False}
    try:
        for _ in range(n_items + 1):
            try:
                item = q.get(timeout=wait)
            except queue.Empty:
                break
            except Exception as exc:  # e.g. the tensor's producer has gone: its memory cannot be opened
                report["get_error"] = f"{type(exc).__name__}: {exc}".strip(": ")
                report["exited_before_get"] = proc.exitcode is not None
                break
            if item is None:
                report["sentinel"] = True
                break
            ok = isinstance(item, torch.Tensor) and item.shape == (100,) and bool((item == 2.0).all())
            report["items"].append("ok" if ok else repr(item)[:80])
        if report["sentinel"]:  # a right producer now waits for done: it must still be running
            deadline = time.monotonic() + min(wait, 2.0)
            while proc.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            report["alive_after_sentinel"] = proc.is_alive()
        done.set()
        proc.join(timeout=wait)
        report["returned_after_done"] = proc.exitcode is not None
        report["exitcode"] = proc.exitcode
    finally:
        if proc.exitcode is None:
            proc.kill()
            proc.join(timeout=5)
    return report


_KEEP_ALIVE = (
    "the consumer opens each tensor's shared memory through the producer that sent it, so a "
    "producer that has gone makes get() fail. Wait on done (with a timeout) after the sentinel"
)


def _judge_producer(module: str, timeout: float) -> str:
    """The learner's producer alone, read by the checker's consumer: items, sentinel, lifetime."""
    wait = min(10.0, timeout / 3)
    probe = run_in_child(__name__, "_probe_producer", (module, FAST_METHOD, 3, wait), timeout=timeout)
    got = value_of(probe, "running your producer", "running your producer failed: timeout")
    if "get_error" in got:
        gone = " after your producer had exited" if got["exited_before_get"] else ""
        raise Incorrect(f"reading your producer's items failed{gone} ({got['get_error']}): {_KEEP_ALIVE}")
    if any(item != "ok" for item in got["items"]) or len(got["items"]) != 3:
        bad = [item for item in got["items"] if item != "ok"]
        raise Incorrect(
            f"producer(1, q, done, 3) put {len(got['items'])} items before its sentinel"
            + (f", among them {bad[0]}" if bad else "")
            + "; expected 3 tensors torch.full((100,), 2.0) (rank + 1 for rank 1)"
        )
    if not got["sentinel"]:
        raise Incorrect(
            f"producer(1, q, done, 3) put its 3 items and then nothing for {wait:.0f} s: no sentinel. "
            "Put None after the items, or the consumer cannot know that this producer has finished"
        )
    if not got["alive_after_sentinel"]:
        raise Incorrect(f"your producer exited right after its sentinel, before done was set: {_KEEP_ALIVE}")
    if not got["returned_after_done"]:
        raise Incorrect(
            f"your producer was still running {wait:.0f} s after done.set(): return once done is set"
        )
    return "producer puts its tensors, one sentinel, and stays alive until done is set"


def _judge_consume(module: str, method: str, timeout: float) -> str:
    """The learner's ``consume(3, 4, method)`` in a child with a deadline: its total."""
    expected = 100.0 * 4 * (1 + 2 + 3)
    outcome = run_in_child(module, "consume", (3, 4, method), timeout=timeout)
    hint = (
        f"consume(3, 4) did not return within {timeout:.0f} s: did you join the producers before "
        "reading all their items? They wait for done, and a process that put items on a Queue "
        "cannot exit before they are read, so join() waits for ever. Read until you have one "
        "sentinel per producer, set done, then join (every get and join with a timeout)"
    )
    total = value_of(outcome, "consume(3, 4)", hint)
    if total != expected:
        hint = (
            "did you stop at the first sentinel? Each producer sends its own: count the sentinels and "
            "stop when you have seen n_producers of them"
            if isinstance(total, float) and total < expected
            else "add item.sum().item() of every tensor, and skip the sentinels"
        )
        raise Incorrect(f"consume(3, 4) returned {total!r}; expected {expected}: {hint}")
    return (
        f"consume reads 3 {method} producers until their 3 sentinels, then joins: total {total:.0f} "
        f"in {outcome.seconds:.1f} s"
    )


def check_ex03(
    module: str | os.PathLike = "helpers.exercises.ex03_queues",
    timeout: float = 60.0,
    method: str = "spawn",
) -> CheckResult:
    """Check exercise 03: one sentinel per producer, producers alive until ``done``, drain before join.

    First the learner's ``producer`` runs alone (in a fork child where the platform has fork),
    read by the checker's own consumer: its items, its sentinel, whether it is still running after
    the sentinel and returns once ``done`` is set. Then ``consume(3, 4, method)`` runs in a child of
    the checker with a ``timeout``, killed with its producers at the deadline (joining before
    draining waits for ever), and its total is compared with 100 * 4 * (1 + 2 + 3).

    Notebook 03, its closing programming exercise.

    >>> check_ex03("helpers.solutions.ex03_queues", method="fork", timeout=20).passed  # doctest: +ELLIPSIS
    checking .../solutions/ex03_queues.py (takes about 20 s) ...
    True
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        report.ok(_judge_producer(module, timeout))
        report.ok(_judge_consume(module, method, timeout))

    return run_check("ex03", module, ("producer", "consume"), body, SECONDS)
