"""Launchers for notebook use: refuse unimportable workers up front, bound every wait, clean up.

``launch`` runs ``fn(rank, *args)`` in ``nprocs`` processes and returns their return values.
``spawn_with_deadline`` is ``torch.multiprocessing.start_processes`` with a deadline, for code
that wants torch's own launcher (DDP). Both refuse, before any process starts, a function that a
spawn or forkserver child could not import: one defined in a ``__main__`` that has no file (a
notebook, an interactive session, ``python -c``), a lambda, a nested function. A function defined
at the top level of a script run as a file is fine: the child imports the script as ``__mp_main__``.

Example::

    >>> from helpers.launch import launch
    >>> launch(pow, args=(2,), nprocs=3, method="spawn")  # pow(rank, 2) in each child
    [0, 1, 4]
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import sys
import time
import traceback
from collections.abc import Callable, Sequence

from helpers.processes import PLATFORM, kill_tree, reap
from helpers.stack_dump import register_stack_dump

__all__ = [
    "FAST_METHOD",
    "NotImportableError",
    "WorkerFailed",
    "check_importable",
    "main_is_importable",
    "launch",
    "spawn_with_deadline",
]

# The cheapest safe start method for workers that need nothing special: fork on Linux (milliseconds
# to start), spawn elsewhere (macOS has fork, but CPython calls it unsafe there: system frameworks may
# crash a forked child; its default is spawn since 3.8). Passed explicitly, so results do not depend
# on the platform's default start method. HELPERS_PLATFORM=darwin gives macOS's choice on Linux (CI).
FAST_METHOD = "fork" if PLATFORM == "linux" else "spawn"
IMPORTING_METHODS = ("spawn", "forkserver")


class NotImportableError(ValueError):
    """The worker function cannot be imported by a spawn/forkserver child.

    What :func:`launch` and :func:`check_importable` raise, before any process starts, for a worker
    defined in a notebook
    ([01 · A worker defined in the notebook fails under spawn](../notebooks/01_start_methods.ipynb#a-worker-defined-in-the-notebook-fails-under-spawn)
    shows the failure they prevent).
    """


class WorkerFailed(RuntimeError):
    """A worker raised, died, or missed the deadline; the message carries the child's traceback.

    What :func:`launch` raises when a worker fails (the exercise checkers report it).
    """

    def __init__(self, message: str, rank: int | None = None, exitcode: int | None = None):
        super().__init__(message)
        self.rank = rank
        self.exitcode = exitcode


def main_is_importable() -> bool:
    """True when a spawn child can import this process's ``__main__``: a script run as a file or with ``-m``.

    The same test as ``multiprocessing.spawn.get_preparation_data``: ``__main__`` has a module spec
    with a name (``python -m pkg.mod``) or a ``__file__``. A notebook kernel's, an interactive
    session's and ``python -c``'s ``__main__`` have neither. Used in
    [01 · A worker defined in the notebook fails under spawn](../notebooks/01_start_methods.ipynb#a-worker-defined-in-the-notebook-fails-under-spawn).

    >>> import sys, types
    >>> saved = sys.modules["__main__"]
    >>> sys.modules["__main__"] = types.ModuleType("__main__")  # what a notebook's __main__ looks like
    >>> main_is_importable()
    False
    >>> sys.modules["__main__"] = saved
    """
    main = sys.modules.get("__main__")
    if main is None:
        return False
    if getattr(getattr(main, "__spec__", None), "name", None) is not None:
        return True
    return getattr(main, "__file__", None) is not None


def check_importable(fn: Callable, method: str) -> None:
    """Raise :class:`NotImportableError` if a ``method`` child could not import ``fn``.

    fork children inherit the parent's memory, so anything goes; spawn and forkserver children
    re-import ``fn`` by module and qualified name. That works for a script's ``__main__`` (the child
    imports the script again, by its path or its ``-m`` name), and fails for a ``__main__`` with no
    file (a notebook, an interactive session, ``python -c``), for lambdas and for functions defined
    inside other functions. :func:`main_is_importable` tells the two ``__main__`` cases apart.

    >>> check_importable(print, "spawn")  # a builtin: importable, no error
    >>> check_importable(lambda rank: rank, "spawn")
    Traceback (most recent call last):
    ...
    helpers.launch.NotImportableError: <lambda> cannot be started with 'spawn': ...
    """
    if method not in mp.get_all_start_methods():
        raise ValueError(f"unknown start method {method!r}; this platform has {mp.get_all_start_methods()}")
    if method not in IMPORTING_METHODS:
        return
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", repr(fn))
    if module == "__main__" and not main_is_importable():
        where = "it is defined in __main__, which here has no file (a notebook, an interactive session or -c)"
    elif "<lambda>" in qualname or "<locals>" in qualname:
        where = "it is a lambda or is defined inside another function"
    else:
        return
    raise NotImportableError(
        f"{qualname} cannot be started with {method!r}: {where}, and a {method} child "
        f"re-imports the function by module and name. Fix: move it into a module "
        f"(e.g. helpers/my_workers.py) and import it from there, or use method='fork' where "
        f"fork is available and safe."
    )


def _run_rank(fn, rank, args, results, release, threads, keep_alive) -> None:
    """Child side of :func:`launch`: run, report, then stay alive until the parent has the result.

    Staying alive matters: a tensor in the result travels as a handle to this process's shared
    memory, which the parent can only open while this process exists.
    """
    register_stack_dump()  # SIGUSR1 dumps stacks where helpers.doctor.inspect reads them, no ptrace needed
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    try:
        results.put((rank, True, fn(rank, *args)))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))
    release.wait(keep_alive)


def launch(
    fn: Callable,
    args: tuple = (),
    nprocs: int = 1,
    *,
    method: str = "spawn",
    timeout: float = 60.0,
    threads: int | None = 1,
) -> list:
    """Run ``fn(rank, *args)`` for ranks ``0..nprocs-1``, each in its own process; return results.
    Notebook 02's appendix and notebook 08
    (demos that may hang or crash).

    - ``method``: the start method, used through ``get_context`` (never ``set_start_method``).
    - ``timeout``: seconds for the whole run; on expiry every child is terminated, with the
      processes it started, and :class:`WorkerFailed` says which ranks were missing.
    - ``threads``: ``torch.set_num_threads`` in each child before ``fn`` runs (default 1: avoids
      oversubscription, and the OpenMP hang of a fork child whose parent ran parallel kernels).
      ``None`` leaves the inherited setting.

    A child that raises makes :class:`WorkerFailed` carry its traceback; the other children are
    terminated. Return values travel through a Queue (pickled; tensors as shared-memory handles).

    >>> launch(divmod, args=(2,), nprocs=2, method="spawn")  # divmod(rank, 2)
    [(0, 0), (0, 1)]
    """
    check_importable(fn, method)
    if nprocs < 1:
        raise ValueError(f"nprocs must be at least 1, got {nprocs}")
    ctx = mp.get_context(method)
    results = ctx.Queue()
    release = ctx.Event()
    procs = [
        ctx.Process(
            target=_run_rank,
            args=(fn, rank, args, results, release, threads, timeout),
            name=f"{getattr(fn, '__name__', 'worker')}-{rank}",
        )
        for rank in range(nprocs)
    ]
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.start()
        values = _collect(procs, results, deadline)
    finally:
        release.set()
        _stop(procs, max(deadline, time.monotonic() + 1.0))
        results.close()
        results.join_thread()
    return [values[rank] for rank in range(nprocs)]


def _stop(procs: Sequence, deadline: float) -> None:
    """Give the workers until ``deadline`` to exit; then kill what a straggler started (a worker may
    start processes of its own: the exercise checkers run a learner's launcher in one), and reap."""
    import psutil

    for p in procs:
        if p.pid is None:  # never started
            continue
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in psutil.Process(p.pid).children():
                    kill_tree(child.pid, grace=0)  # not our children: kill_tree reaps none of them
    reap(procs, timeout=0)


def _collect(procs: Sequence, results, deadline: float) -> dict:
    """Gather one message per rank; fail fast on an error, a silent death, or the deadline."""
    values: dict[int, object] = {}
    while len(values) < len(procs):
        try:
            rank, ok, value = results.get(timeout=0.1)
        except queue.Empty:
            for rank, p in enumerate(procs):
                if rank not in values and p.exitcode is not None:
                    raise WorkerFailed(
                        f"rank {rank} exited with code {p.exitcode} before reporting a result "
                        f"(see the child's output above for its traceback)",
                        rank=rank,
                        exitcode=p.exitcode,
                    ) from None
            if time.monotonic() > deadline:
                missing = sorted(set(range(len(procs))) - set(values))
                raise WorkerFailed(f"deadline passed; ranks {missing} did not finish") from None
            continue
        if not ok:
            raise WorkerFailed(f"rank {rank} raised:\n{value}", rank=rank)
        values[rank] = value
    return values


def spawn_with_deadline(
    fn: Callable,
    args: tuple = (),
    nprocs: int = 1,
    *,
    method: str = "spawn",
    timeout: float = 60.0,
) -> None:
    """``torch.multiprocessing.start_processes(fn, args, nprocs, start_method=method)``, bounded.
    Notebook 01's appendix on ``mp.spawn`` with a deadline.

    torch calls ``fn(rank, *args)``. A child exception surfaces as torch's
    ``ProcessRaisedException`` (with the child's traceback), a crash as
    ``ProcessExitedException``; torch then terminates the other children. Past ``timeout`` every
    child is terminated and ``TimeoutError`` is raised, where ``join=True`` would wait forever.

    >>> spawn_with_deadline(divmod, args=(1,), nprocs=2, method="spawn")
    """
    import torch.multiprocessing as tmp

    check_importable(fn, method)
    context = tmp.start_processes(fn, args=args, nprocs=nprocs, join=False, start_method=method)
    deadline = time.monotonic() + timeout
    try:
        while not context.join(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{nprocs} processes still running after {timeout:.0f} s; terminated")
    finally:
        reap(context.processes, timeout=0)
        for name in context.error_files:  # a failed rank's traceback: torch never deletes the file
            if os.path.exists(name):
                os.remove(name)
