"""Executing notebooks from Python (nbmake, nbclient): bound a lost wake-up to one second.

nbclient waits for each cell's ``execute_reply`` with a single
``AsyncZMQSocketChannel.get_msg(timeout=<per-cell timeout>)``, that is one ``zmq.asyncio`` poll.
Now and then (a notebook run in about 20 on a 2-core machine) the reply arrives but the poll is
never woken; when its timeout expires pyzmq polls the socket once more, finds the reply and the run
goes on, a whole per-cell timeout (120 s under ``make test``) late and without an error.
:func:`poll_in_slices` makes every wait a series of short polls, so such a reply is picked up at
the end of the current slice. ``conftest.py`` and ``scripts/build_site.py`` install it; so can an
instructor who runs the notebooks with nbclient in their own CI.

Example::

    >>> poll_in_slices()
    >>> late_replies() >= 0
    True
"""

from __future__ import annotations

import functools
import queue
import time
from collections.abc import Awaitable, Callable

__all__ = ["SLICE_S", "sliced", "poll_in_slices", "late_replies"]

SLICE_S = 1.0


def sliced(
    get_msg: Callable[..., Awaitable[dict]], slice_s: float = SLICE_S
) -> Callable[..., Awaitable[dict]]:
    """Wrap an async ``get_msg(self, timeout)`` to wait in polls of at most ``slice_s`` seconds.

    Same contract as the original: the message, or ``queue.Empty`` once ``timeout`` (None: no limit)
    has passed without one. ``wrapper.late`` counts the messages found only when a whole slice ran
    out: wake-ups that never came.

    A channel that is never woken and gets its message 0.3 s into a wait of 60 s::

        >>> import asyncio, time
        >>> class Sleepy:  # returns what has arrived only when its whole timeout is over
        ...     arrives = time.monotonic() + 0.3
        ...     async def get_msg(self, timeout=None):
        ...         await asyncio.sleep(timeout)
        ...         if time.monotonic() < self.arrives:
        ...             raise queue.Empty
        ...         return {"msg_type": "execute_reply"}
        >>> get_msg = sliced(Sleepy.get_msg, slice_s=0.2)
        >>> start = time.monotonic()
        >>> asyncio.run(get_msg(Sleepy(), timeout=60)), time.monotonic() - start < 1
        ({'msg_type': 'execute_reply'}, True)
        >>> get_msg.late
        1
    """

    @functools.wraps(get_msg)
    async def wrapper(self, timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait = slice_s if left is None else min(slice_s, left)
            start = time.monotonic()
            try:
                message = await get_msg(self, timeout=wait)
            except queue.Empty:
                if left is not None and left <= slice_s:
                    raise
                continue
            if wait == slice_s and time.monotonic() - start >= slice_s:
                wrapper.late += 1
            return message

    wrapper.sliced, wrapper.late = True, 0
    return wrapper


def poll_in_slices(slice_s: float = SLICE_S) -> None:
    """Make jupyter_client's async channels wait in ``slice_s`` slices (idempotent).

    >>> poll_in_slices()
    >>> from jupyter_client.channels import AsyncZMQSocketChannel
    >>> AsyncZMQSocketChannel.get_msg.sliced
    True
    """
    from jupyter_client.channels import AsyncZMQSocketChannel

    if not getattr(AsyncZMQSocketChannel.get_msg, "sliced", False):
        AsyncZMQSocketChannel.get_msg = sliced(AsyncZMQSocketChannel.get_msg, slice_s)


def late_replies() -> int:
    """Messages the installed wrapper found only when a slice ran out (each would have cost a timeout).

    >>> isinstance(late_replies(), int)
    True
    """
    from jupyter_client.channels import AsyncZMQSocketChannel

    return getattr(AsyncZMQSocketChannel.get_msg, "late", 0)
