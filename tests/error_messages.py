"""Matching the catalog's messages against what the field guides' demonstrations print.

The field guides' tests produce a message with the notebook's own helpers, find its catalog entry
with :func:`entry_for` and compare with :func:`matches` (``tests/test_catalog.py`` runs each entry's
own reproduction).
"""

from __future__ import annotations

import re

from helpers.catalog import Entry, entries


def entry_for(case_words: str) -> Entry:
    """The one catalog entry whose message contains ``case_words``."""
    (entry,) = [e for e in entries() if case_words in e.message]
    return entry


def matches(printed: str, message: str) -> bool:
    """True when ``message`` occurs in ``printed``, with any numbers and any runs of whitespace.

    >>> matches("RuntimeError: Timed out waiting 3000ms for recv", "Timed out waiting 5000ms for recv")
    True
    >>> matches("port: 80, code: -98", "port: 29500, code: -99")
    False
    """
    pattern = r"\s+".join(re.sub(r"\d+", r"\\d+", re.escape(word)) for word in message.split())
    return re.search(pattern, " ".join(printed.split())) is not None and same_errno(printed, message)


def same_errno(printed: str, message: str) -> bool:
    """Error numbers (``code: -98``, ``[Errno 24]``, ``(28)``) must be the same, not any number."""
    codes = re.compile(r"code: -?\d+|\[Errno \d+\]|\(\d+\)$")
    return set(codes.findall(message)) <= set(codes.findall(" ".join(printed.split())))
