"""The catalog of messages: every message torch's process-based parallelism prints that does not name
its own fix, with its cause, the fix, where the series teaches the mechanism, and a reproduction.

Entries are data, one module per area (:data:`AREAS`), each a tuple ``ENTRIES`` of :class:`Entry`.
They come from the inventory of torch's own source (``tools/message_inventory.tsv``, made by ``python
-m tools.message_inventory``): a site classed ``explained:<id>`` is explained by the entry ``<id>``,
and an entry lists the inventory keys it explains in ``sites``. :mod:`helpers.explain` matches a
pasted traceback against them; :data:`helpers.error_index.ERROR_INDEX` is the view of the entries that
a notebook section explains; docs/errors.md is generated from them.

A **reproduction** is a standalone script (plain torch and the standard library, the main guard, bounded
waits) that makes torch print the message on a Linux CPU: :func:`reproduce` runs it in a fresh
interpreter with a deadline (``tests/test_catalog.py`` runs them all from one interpreter that has
torch imported already; a script that exits 77 says this machine refuses what it needs, such as a
user namespace, and is skipped). ``fixed`` is the same script with the fix: it runs clean. An entry that no
Linux CPU can reproduce (NCCL, CUDA IPC, Windows, macOS) says in ``read_from`` where it was read.

Example::

    >>> from helpers import catalog
    >>> entry = catalog.entry("unpicklable_worker")
    >>> bool(entry.search("AttributeError: Can't get attribute 'worker' on <module '__main__' (built-in)>"))
    True
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

__all__ = ["AREAS", "Entry", "Reproduction", "entries", "entry", "reproduce"]

AREAS = ("start_methods", "sharing", "dataloader", "rendezvous", "collectives", "ddp", "launchers", "cuda")
"""The catalog's modules, ``helpers.catalog.<area>``, in the order entries are listed."""


@dataclass(frozen=True)
class Entry:
    """One message: how it is printed, why, the fix, and how to make torch print it.

    - ``id``: a stable name (``explained:<id>`` in the inventory, ``explain``'s answers, anchors).
    - ``message``: the message as printed, one real example (numbers, names and paths as a user saw
      them); ``pattern``, a regular expression that matches it in a traceback or log, defaults to
      ``message`` with any number for a number and any white space for a space.
    - ``cause``: two or three sentences; ``fix``: what to change.
    - ``teaches``: the notebook section that teaches the mechanism (``NN_name.ipynb#anchor``), if any.
    - ``sites``: the inventory keys (``tools/message_inventory.tsv``) whose message this is.
    - ``reproduction``: a script that prints the message on a Linux CPU; ``fixed``: the script with the
      fix, which runs clean; ``read_from``: where the message was read when no CPU can print it.
    - ``versions``: the torch versions that print it, when not every version the series names.
    - ``case``: the error index case (:data:`helpers.error_index.CASES`) for the index's rows.
    - ``rank``: a generic message (a wrapper such as ``ChildFailedError``) ranks below a specific one.
    """

    id: str
    message: str
    cause: str
    fix: str
    teaches: str = ""
    sites: tuple[str, ...] = ()
    reproduction: str = ""
    fixed: str = ""
    read_from: str = ""
    versions: str = ""
    pattern: str = ""
    case: str = ""
    rank: int = 0
    area: str = field(default="", compare=False)

    @property
    def regex(self) -> re.Pattern[str]:
        """The compiled ``pattern`` (or the one made from ``message``)."""
        return _compiled(self.pattern or pattern_for(self.message))

    def search(self, text: str) -> re.Match[str] | None:
        """Where this entry's message occurs in ``text`` (a traceback, a log), or None.

        >>> entry("port_in_use").search("nothing of the kind") is None
        True
        """
        return self.regex.search(text)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


def pattern_for(message: str) -> str:
    """A regular expression for ``message`` as printed: any number for a number, any white space
    for a space, and the exception's module optional (``DistNetworkError`` or
    ``torch.distributed.DistNetworkError``).

    >>> bool(re.search(pattern_for("process 0 terminated with signal SIGKILL"),
    ...                "process 3 terminated with  signal SIGKILL"))
    True
    >>> bool(re.search(pattern_for("torch.distributed.DistNetworkError: address in use"),
    ...                "DistNetworkError: address in use"))
    True
    """
    prefix = re.match(r"(?:([\w.]+)\.)?(\w+(?:Error|Exception|Warning|Exit|Quit|Interrupt)): ", message)
    rest = message[prefix.end() :] if prefix else message
    words = [re.sub(r"\d+", r"\\d+", re.escape(word)) for word in rest.split()]
    body = r"\s+".join(words)
    return rf"(?:(?:[\w.]+\.)?{prefix[2]}:\s+)?{body}" if prefix else body


@cache
def entries() -> tuple[Entry, ...]:
    """Every entry, area by area (:data:`AREAS`).

    >>> len({e.id for e in entries()}) == len(entries())
    True
    """
    found = []
    for area in AREAS:
        module = importlib.import_module(f"helpers.catalog.{area}")
        found += [_with_area(e, area) for e in module.ENTRIES]
    return tuple(found)


def _with_area(e: Entry, area: str) -> Entry:
    object.__setattr__(e, "area", area)
    return e


def entry(entry_id: str) -> Entry:
    """The entry named ``entry_id``; a ``KeyError`` that lists close names otherwise.

    >>> entry("oom_killed").area
    'launchers'
    """
    for e in entries():
        if e.id == entry_id:
            return e
    close = [e.id for e in entries() if entry_id.split("_")[0] in e.id][:5]
    raise KeyError(f"no catalog entry {entry_id!r}; close: {close}")


@dataclass(frozen=True)
class Reproduction:
    """What a reproduction printed (stdout and stderr together), its exit code (None: killed at the
    deadline), and whether the entry's message is in it."""

    output: str
    returncode: int | None
    printed: bool


def reproduce(e: Entry, fixed: bool = False, timeout: float = 120.0) -> Reproduction:
    """Run ``e``'s reproduction (``fixed=True``: the version with the fix) as a script in a fresh
    interpreter, in a temporary folder, with a deadline; the child's process group is killed at it.

    >>> catalog_entry = entry("start_method_set_twice")
    >>> reproduce(catalog_entry).printed, reproduce(catalog_entry, fixed=True).printed
    (True, False)
    """
    script = e.fixed if fixed else e.reproduction
    if not script:
        raise ValueError(f"{e.id} has no {'fixed version' if fixed else 'reproduction'}: {e.read_from}")
    with tempfile.TemporaryDirectory(prefix="reproduce-") as folder:
        path = Path(folder) / f"{e.id}.py"
        path.write_text(script)
        child = subprocess.Popen(
            [sys.executable, str(path)],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = child.communicate(timeout=timeout)
            code: int | None = child.returncode
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 9) if hasattr(os, "killpg") else child.kill()
            output, _ = child.communicate()
            code = None
    return Reproduction(output, code, bool(e.search(output)))
