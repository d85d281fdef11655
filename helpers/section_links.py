"""Links to notebook sections, and how a terminal prints them.

The series refers to a section of a notebook by a Markdown link to its id (the anchor above its
heading), never by its number: ``[03 · Keep the producer alive](../notebooks/03_queues_and_pipes.ipynb#keep-the-producer-alive)``.
Links in ``helpers`` are written as from ``helpers/`` (and from ``docs/``, which shows them), so
``../notebooks/``. JupyterLab, GitHub and the site render them; a terminal prints
:func:`as_plain_text` instead. ``tests/test_links.py`` checks that every link resolves.
"""

from __future__ import annotations

import re

__all__ = ["as_plain_text"]

SECTION_LINK = re.compile(r"\[(?:\d\d · )?([^\]]+)\]\((?:[^)#]*/)?(\d\d_\w+\.ipynb)#[a-z0-9-]+\)")
"""A Markdown link to a section of a notebook: its text (without ``NN · ``), the notebook's file name."""


def as_plain_text(text: str) -> str:
    """``text`` with each link to a notebook section written as the notebook's file and the link's
    text, for a terminal (the doctor's "taught in", an exercise checker's hint).

    >>> as_plain_text("see [03 · Keep the producer alive](../notebooks/03_queues_and_pipes.ipynb#keep-the-producer-alive)")
    'see 03_queues_and_pipes.ipynb, "Keep the producer alive"'
    """
    return SECTION_LINK.sub(lambda m: f'{m[2]}, "{m[1]}"', text)
