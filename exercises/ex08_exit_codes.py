"""Exercise 08 (debugging): say what a child's exit code means.

Write ``explain_exitcode(exitcode)`` for the ``exitcode`` of a ``multiprocessing.Process``:

- ``None`` -> ``"running"`` (not finished yet, or never joined)
- ``0`` -> ``"ok"``
- a positive ``n`` -> ``"error n"`` (e.g. ``sys.exit(3)`` gives ``"error 3"``; an uncaught
  exception gives ``"error 1"``)
- a negative ``-n`` -> ``"killed by SIGNAME"``, the name of signal ``n`` (e.g. ``-9`` ->
  ``"killed by SIGKILL"``; use ``signal.Signals(n).name``)

The checker starts real processes that end in each of these ways and compares.

Check with::

    from helpers.checkers import check_ex08; check_ex08()
"""

from __future__ import annotations


def explain_exitcode(exitcode: int | None) -> str:
    """Describe a ``Process.exitcode``: "running", "ok", "error N" or "killed by SIGNAME"."""
    raise NotImplementedError("exercise 08: write explain_exitcode")
