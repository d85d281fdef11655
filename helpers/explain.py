"""Paste a traceback or a log, get the catalog's entries that match it: cause, fix, where it is taught.

``python -m helpers.explain`` reads the text from standard input, from a file (``--file``) or from its
arguments (the message itself); in a notebook, ``from helpers import explain`` then ``explain(text)``
(the module is callable) prints the same. Entries come from :mod:`helpers.catalog`; the best match
comes first: a specific message before a generic wrapper (``ChildFailedError``, a process that
"terminated with exit code 1"), then the longer match. When nothing matches it says so, and which
lines it looked at. ``--reproduce`` runs the best entry's reproduction (the message appears) and its
fixed version (the message goes away), each in a fresh interpreter with a deadline.

    $ python -m helpers.explain "RuntimeError: context has already been set"
    $ torchrun train.py 2>&1 | python -m helpers.explain
    $ python -m helpers.explain --file job.log --reproduce

Taught in [10 · Explain a traceback](../notebooks/10_field_guide.ipynb#explain-a-traceback).

Example::

    >>> [e.id for e in matches("RuntimeError: context has already been set")]
    ['start_method_set_twice']
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
import types

from helpers.catalog import Entry, entries, reproduce
from helpers.section_links import as_plain_text

__all__ = ["explain", "matches", "report", "main"]

ERROR_LINE = re.compile(r"\b\w*(?:Error|Exception|Warning|Exit|Quit|failed|timed out|Timeout)\b", re.I)


def matches(text: str) -> list[Entry]:
    """The entries whose message occurs in ``text``, best first: a specific message before a generic
    one (``rank`` below zero), then the longer match, then the one printed last (the final error of a
    chained traceback).

    >>> matches("nothing torch would print")
    []
    """
    found = []
    for e in entries():
        hits = list(e.regex.finditer(text))
        if hits:
            last = hits[-1]
            found.append(((e.rank, len(last.group(0)), last.start()), e))
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [e for _, e in found]


def _lines_looked_at(text: str) -> list[str]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if ERROR_LINE.search(line)]
    return (errors or lines)[-5:]


def report(text: str, limit: int = 3) -> str:
    """What :func:`explain` prints for ``text``: up to ``limit`` entries, or what was looked for.

    >>> print(report("ValueError: something else entirely"))  # doctest: +ELLIPSIS
    No catalog entry matches. Looked for ... messages in these lines:
      ValueError: something else entirely
    ...
    """
    found = matches(text)
    if not found:
        looked = "\n".join(f"  {line[:150]}" for line in _lines_looked_at(text)) or "  (no text)"
        return (
            f"No catalog entry matches. Looked for {len(entries())} messages in these lines:\n{looked}\n"
            "Paste the whole output (the first error is often above the last), check the machine with "
            "`python -m helpers.doctor`, or search docs/errors.md for another line of it."
        )
    parts = []
    for n, e in enumerate(found[:limit], 1):
        parts.append(_describe(e, n))
    if len(found) > limit:
        parts.append(f"... and {len(found) - limit} more: {', '.join(e.id for e in found[limit:])}")
    return "\n\n".join(parts)


def _describe(e: Entry, n: int) -> str:
    wrap = lambda label, text: textwrap.fill(  # noqa: E731
        f"{label}: {text}", 110, subsequent_indent="    "
    )
    lines = [f"{n}. {e.id}  ({e.area})", f"   {e.message[:200]}"]
    lines += ["  " + wrap("cause", e.cause), "  " + wrap("fix", e.fix)]
    if e.teaches:
        lines.append("  " + wrap("taught in", as_plain_text(_link(e.teaches))))
    where = "reproduction: python -m helpers.explain --reproduce " + e.id if e.reproduction else ""
    if e.read_from:
        where = f"read from: {e.read_from}"
    if e.versions:
        lines.append("  " + wrap("versions", e.versions))
    if where:
        lines.append("  " + wrap(where.split(":")[0], where.split(": ", 1)[1]))
    return "\n".join(lines)


def _link(teaches: str) -> str:
    notebook, _, anchor = teaches.partition("#")
    return f"[{notebook[:2]} · {anchor.replace('-', ' ')}](../notebooks/{teaches})"


def explain(text: str, limit: int = 3) -> None:
    """Print the entries that match ``text`` (a traceback, a log, a message), best first; or what was
    looked for when none does. ``helpers.explain(text)`` calls it.

    >>> explain("RuntimeError: context has already been set")  # doctest: +ELLIPSIS
    1. start_method_set_twice  (start_methods)
    ...
    """
    print(report(text, limit))


def _reproduce(entry_id: str) -> int:
    e = next((e for e in entries() if e.id == entry_id), None)
    if e is None:
        print(f"no catalog entry {entry_id!r}")
        return 2
    if not e.reproduction:
        print(f"{e.id} has no reproduction on this machine; read from: {e.read_from}")
        return 1
    print(f"--- {e.id}: the reproduction\n{e.reproduction.strip()}\n--- what it prints")
    run = reproduce(e)
    print(run.output.rstrip())
    print(f"--- exit code {run.returncode}; the message {'appeared' if run.printed else 'did NOT appear'}")
    if e.fixed:
        print(f"--- with the fix\n{e.fixed.strip()}\n--- what it prints")
        after = reproduce(e, fixed=True)
        print(after.output.rstrip() or "(nothing)")
        gone = "is gone" if not after.printed else "is STILL printed"
        print(f"--- exit code {after.returncode}; the message {gone}")
    return 0 if run.printed else 1


def main(argv: list[str] | None = None) -> int:
    """The command line: a message as arguments, ``--file``, or standard input; ``--reproduce ID`` or
    ``--reproduce`` alone (the best match's). Its exit code: 0 when an entry matched (or the
    reproduction printed its message), 1 when none did.

    >>> code = main(["RuntimeError: context has already been set"])  # doctest: +ELLIPSIS
    1. start_method_set_twice  (start_methods)
    ...
    >>> code
    0
    """
    parser = argparse.ArgumentParser(prog="python -m helpers.explain", description=__doc__.splitlines()[0])
    parser.add_argument("message", nargs="*", help="the message (default: read standard input)")
    parser.add_argument("--file", help="a file with the traceback or log")
    parser.add_argument("--limit", type=int, default=3, help="how many entries to show (default 3)")
    parser.add_argument(
        "--reproduce",
        nargs="?",
        const="",
        metavar="ID",
        help="run an entry's reproduction and its fix (default: the best match's)",
    )
    args = parser.parse_args(argv)
    if args.reproduce:
        return _reproduce(args.reproduce)
    if args.file:
        with open(args.file, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    elif args.message:
        text = " ".join(args.message)
    else:
        text = sys.stdin.read()
    print(report(text, args.limit))
    found = matches(text)
    if args.reproduce == "" and found:
        return _reproduce(found[0].id)
    return 0 if found else 1


class _CallableModule(types.ModuleType):
    """``helpers.explain(text)``: the module called is :func:`explain`."""

    def __call__(self, text: str, limit: int = 3) -> None:
        explain(text, limit)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
