"""Workers and scripts for notebook 01 (start methods).

Everything here runs in child processes, so it lives in an importable module: a spawn or
forkserver child re-imports each function by module and name. None of them needs torch, so the
module does not import it: a spawn child of this module starts in about a tenth of a second.
The torch worker and the start-up measurements are in :mod:`helpers.torch_worker`.

Example::

    >>> import torch.multiprocessing as mp
    >>> from helpers.start_methods import whoami
    >>> ctx = mp.get_context("spawn")
    >>> results = ctx.Queue()
    >>> p = ctx.Process(target=whoami, args=(0, results))
    >>> p.start()
    >>> results.get(timeout=60)["rank"], p.join(timeout=30), p.exitcode
    (0, None, 0)
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

__all__ = [
    "STATE",
    "square",
    "whoami",
    "what_i_inherit",
    "report_rank",
    "fail_on_rank",
    "guard_script",
    "SET_START_METHOD_TWICE",
]

# Module state that notebook 01 changes after import: a fork child sees the change (it is a copy
# of the parent's memory); a spawn child re-imports this module and sees the original.
STATE = {"value": "set at import"}


def square(x: int) -> int:
    """One independent job for a ``Pool``
    ([01 · A pool of workers for independent jobs](../notebooks/01_start_methods.ipynb#a-pool-of-workers-for-independent-jobs)).

    >>> square(3)
    9
    """
    return x * x


def whoami(rank: int, results: mp.queues.Queue) -> None:
    """Put who this child is on ``results``: rank, pid, parent pid and process name.

    [01 · Three start methods](../notebooks/01_start_methods.ipynb#three-start-methods) starts it once per
    start method (a forkserver child's parent is the server).

    >>> import queue
    >>> q = queue.Queue()
    >>> whoami(0, q)
    >>> q.get()["pid"] == os.getpid()
    True
    """
    results.put(
        {
            "rank": rank,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "name": mp.current_process().name,
        }
    )


def what_i_inherit(rank: int, fd: int, results: mp.queues.Queue) -> None:
    """Put what this child inherited on ``results``: :data:`STATE`, ``$LESSON_VAR``, file ``fd``.

    Used in
    [01 · Appendix: what a child inherits, live](../notebooks/01_start_methods.ipynb#appendix-what-a-child-inherits-live):
    a fork child sees module state changed
    after import and every open file descriptor (it reads 5 bytes through ``fd``, moving the offset
    the parent shares); spawn and forkserver children re-import the module and get only the
    standard streams and what multiprocessing passes them.

    >>> import queue, tempfile
    >>> q = queue.Queue()
    >>> with tempfile.TemporaryFile() as f:
    ...     _ = f.write(b"0123456789"); _ = f.seek(0)
    ...     what_i_inherit(0, f.fileno(), q)
    >>> q.get()["read from fd"]
    '01234'
    """
    try:
        read = os.read(fd, 5).decode()
    except OSError as error:
        read = f"{type(error).__name__}: {error.strerror}"
    results.put({"STATE": STATE["value"], "LESSON_VAR": os.environ.get("LESSON_VAR"), "read from fd": read})


def report_rank(rank: int, results: mp.queues.Queue) -> None:
    """For ``torch.multiprocessing.spawn``: put ``(rank, pid)`` on ``results``.
    [01 · `mp.spawn`](../notebooks/01_start_methods.ipynb#mp-spawn-one-process-per-rank) starts it with ``mp.spawn``.

    ``mp.spawn`` calls ``fn(rank, *args)``: the rank comes first, always.

    >>> import queue
    >>> q = queue.Queue()
    >>> report_rank(3, q)
    >>> q.get() == (3, os.getpid())
    True
    """
    results.put((rank, os.getpid()))


def fail_on_rank(rank: int, bad_rank: int, others_sleep: float = 30.0) -> None:
    """Raise on ``bad_rank``; the other ranks sleep, so someone must terminate them.
    [01 · Start processes](../notebooks/01_start_methods.ipynb#start-processes-start-join-timeout-exitcode)
    (the exit codes of a failed and of a hung child) and its appendix
    [01 · Appendix: `mp.spawn` with a deadline](../notebooks/01_start_methods.ipynb#appendix-mp-spawn-with-a-deadline)
    (what ``mp.spawn`` does when one rank fails).

    >>> fail_on_rank(0, bad_rank=0)
    Traceback (most recent call last):
    ...
    ValueError: rank 0 failed on purpose
    """
    if rank == bad_rank:
        raise ValueError(f"rank {rank} failed on purpose")
    time.sleep(others_sleep)


# Scripts for the lessons that need a real __main__ or a pristine interpreter.
SET_START_METHOD_TWICE = """\
import multiprocessing as mp
mp.set_start_method("spawn")
print("first call: ok, method =", mp.get_start_method())
try:
    mp.set_start_method("spawn")   # what a re-run notebook cell does
except RuntimeError as error:
    print("second call: RuntimeError:", error)
ctx = mp.get_context("spawn")       # get_context can be called any number of times
print("get_context: ok, method =", ctx.get_start_method())
mp.set_start_method("spawn", force=True)   # force=True replaces it (for a script's own start-up)
print("force=True: ok, method =", mp.get_start_method())
"""


def guard_script(guarded: bool, method: str = "spawn") -> str:
    """A script that starts one ``method`` child, with or without the ``__main__`` guard.

    A spawn child prepares by importing the parent's script as ``__mp_main__``
    (``multiprocessing.spawn.prepare``). Without the guard that import runs the top level again and
    tries to start a process while still bootstrapping: the child exits with code 1. Under
    forkserver, Python up to 3.13.7 does the same in each child; from 3.13.8 and 3.14 (CPython
    gh-126631) the forkserver *server* imports the script once when it starts, fails there, and the
    parent's ``start()`` raises (``EOFError`` on 3.13, ``ConnectionResetError`` on 3.14). 3.15's server
    ignores the failure (``set_forkserver_preload(on_error="ignore")``, the default) and each child
    fails again, with exit code 1.
    Used in [01 · The `if __name__ == "__main__":` guard](../notebooks/01_start_methods.ipynb#the-if-name-main-guard).

    >>> "if __name__" in guard_script(True), "if __name__" in guard_script(False)
    (True, False)
    """
    head = [
        "import multiprocessing as mp",
        "",
        "def work():",
        '    print("child: work() ran")',
        "",
        f"ctx = mp.get_context({method!r})",
    ]
    body = [
        "proc = ctx.Process(target=work)",
        "proc.start()",
        "proc.join(30)",
        'print("parent: child exit code", proc.exitcode)',
    ]
    if guarded:
        body = ['if __name__ == "__main__":'] + ["    " + line for line in body]
    return "\n".join(head + body) + "\n"
