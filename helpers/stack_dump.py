"""Stack dumps without ptrace: faulthandler on SIGUSR1, into a memfd that ``helpers.doctor.inspect`` reads."""

from __future__ import annotations

import faulthandler
import os
import signal

__all__ = ["register_stack_dump"]

STACK_DUMP_NAME = "helpers-stack-dump"  # the memfd that register_stack_dump() writes stacks into


def register_stack_dump() -> int | None:
    """Let :func:`inspect` read this process's Python stacks without ptrace: faulthandler on SIGUSR1.

    The stacks go to an anonymous in-memory file (``memfd``) that :func:`inspect` finds through
    ``/proc/PID/fd`` and reads after sending SIGUSR1, where ``py-spy`` cannot attach (a container
    without ``SYS_PTRACE``). Processes started by ``helpers.launch.launch`` call it. Returns the
    fd, or None where memfd does not exist (not Linux).
    [08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand)
    uses it.

    >>> fd = register_stack_dump()
    >>> fd is None or os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:")
    True
    >>> faulthandler.unregister(signal.SIGUSR1)
    True
    """
    if not hasattr(os, "memfd_create") or not hasattr(signal, "SIGUSR1"):
        return None
    fd = os.memfd_create(STACK_DUMP_NAME)  # close-on-exec: programs this process execs do not inherit it
    faulthandler.register(signal.SIGUSR1, file=fd, all_threads=True)
    return fd
