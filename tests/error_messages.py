"""Matching the index of error messages against what torch and Python print.

The tests that produce a message of :data:`helpers.field_guide.ERROR_INDEX` (``test_error_index.py``
and the field guides' own tests) find its row with :func:`entry_for` and compare with :func:`matches`.
"""

from __future__ import annotations

import re

from helpers.error_index import ERROR_INDEX, IndexEntry


def entry_for(case_words: str) -> IndexEntry:
    """The one row of the index whose message contains ``case_words``."""
    (entry,) = [e for e in ERROR_INDEX if case_words in e.message]
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
