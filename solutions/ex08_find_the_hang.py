"""Reference solution to exercise 08."""

from __future__ import annotations

import re

FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>.+)$')


def where_it_waits(dump: str, my_file: str) -> tuple[str, int]:
    """The (function name, line number) in ``my_file`` where the dumped process waits."""
    for text in dump.splitlines():  # most recent call first: the first frame of my_file is the one
        frame = FRAME.match(text)
        if frame and frame["file"] == my_file:
            return frame["function"], int(frame["line"])
    raise ValueError(f"no frame of {my_file} in this dump")
