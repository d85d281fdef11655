"""Reference solution to exercise 08."""

from __future__ import annotations

import signal


def explain_exitcode(exitcode: int | None) -> str:
    """Describe a ``Process.exitcode``: "running", "ok", "error N" or "killed by SIGNAME"."""
    if exitcode is None:  # test None first: ``not exitcode`` is also true for 0
        return "running"
    if exitcode == 0:
        return "ok"
    if exitcode > 0:
        return f"error {exitcode}"
    return f"killed by {signal.Signals(-exitcode).name}"
