"""Workers and tools for notebook 08 (debugging and pitfalls): hangs, exit codes, leftovers, logs.

Everything that runs in a child lives here (importable by spawn and forkserver children); every
wait is bounded, and every process these functions start is gone when they return.

Example::

    >>> import multiprocessing as mp
    >>> from helpers.debugging import exit_by
    >>> child = mp.get_context("spawn").Process(target=exit_by, args=("os._exit(7)",))
    >>> child.start(); child.join(timeout=60); child.exitcode
    7
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import logging.handlers
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    import multiprocessing.queues
    import multiprocessing.synchronize
    import queue

__all__ = [
    "take_lock_twice",
    "DUMP_END",
    "hang_with_dump_on_signal",
    "read_stack_dump",
    "py_spy_path",
    "profiling_dump_command",
    "EXIT_CASES",
    "exit_by",
    "sleep_for",
    "wait_for_status",
    "orphan_demo",
    "find_processes",
    "log_from_child",
    "ListHandler",
    "exit_on_rank",
    "wait_until_signalled",
    "read_pids",
    "seconds_until_exit",
    "make_orphans",
]


# --- 1. Hangs -------------------------------------------------------------------------------------


def take_lock_twice(ready: threading.Event | multiprocessing.synchronize.Event | None = None) -> None:
    """Deadlock on purpose: acquire a non-reentrant ``threading.Lock`` twice. Never returns.

    ``ready`` (an Event), when given, is set just before the second acquire.
    Not run here: it hangs on purpose (run it in a child with a deadline).

    Used in [08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand).

    >>> hung = run_with_deadline(take_lock_twice, timeout=2)  # doctest: +SKIP
    >>> hung.timed_out  # doctest: +SKIP
    True
    """
    lock = threading.Lock()
    lock.acquire()
    if ready is not None:
        ready.set()
    lock.acquire()  # blocks forever: the classic self-deadlock


DUMP_END = "-- end of stack dump --"


def hang_with_dump_on_signal(
    ready: threading.Event | multiprocessing.synchronize.Event | None, dump_path: str
) -> None:
    """A worker that dumps its stacks into ``dump_path`` on SIGUSR1, then deadlocks (POSIX).

    faulthandler writes the stacks from C, in many small writes, whatever the process is doing;
    ``chain=True`` then calls the handler that was there before, a Python one that appends
    :data:`DUMP_END`, so a reader knows the dump is complete.
    Not run here: it hangs on purpose.

    Used in [08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand).

    >>> hang_with_dump_on_signal(None, "/tmp/stacks.txt")  # doctest: +SKIP
    """
    dump = open(dump_path, "w")  # noqa: SIM115 (must stay open for faulthandler)
    signal.signal(signal.SIGUSR1, lambda signum, frame: print(DUMP_END, file=dump, flush=True))
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True, chain=True)
    take_lock_twice(ready)


def read_stack_dump(pid: int, dump_path: str, timeout: float = 30.0, until: str | None = None) -> str:
    """Ask a blocked process for its stacks (SIGUSR1) and return that dump once complete; "" past
    ``timeout``.

    The steps of a cell of
    [08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand),
    for the tests and the exercise checker: wait until
    ``pid`` sleeps (blocked, not starting up), send SIGUSR1, read ``dump_path`` until the worker's
    handler has written :data:`DUMP_END` (see :func:`hang_with_dump_on_signal`) after the dumps
    already there. A process can sleep on its way to the wait too (a file it writes, a lock inside
    ``Event.set``): with ``until``, the text a dump of the real wait shows, it asks again until a
    dump holds it. Every wait is bounded.

    >>> read_stack_dump(os.getpid(), "/nonexistent", timeout=0)
    ''
    """
    deadline = time.monotonic() + timeout
    if wait_for_status(pid, psutil.STATUS_SLEEPING, timeout) != psutil.STATUS_SLEEPING:
        return ""
    path = Path(dump_path)
    while True:
        done = path.read_text().count(DUMP_END)
        os.kill(pid, signal.SIGUSR1)
        while (text := path.read_text()).count(DUMP_END) == done:
            if time.monotonic() > deadline:
                return ""
            time.sleep(0.01)
        dump = text.split(DUMP_END + "\n")[done]  # the one this signal asked for
        if until is None or until in dump:
            return dump
        if time.monotonic() > deadline:
            return ""


def py_spy_path() -> str | None:
    """The ``py-spy`` executable: next to this interpreter (a venv's bin/) or on PATH; None if absent.

    Used in [08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand).

    >>> py_spy_path() is None or py_spy_path().endswith("py-spy")
    True
    """
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def profiling_dump_command(pid: int) -> list[str] | None:
    """The standard library's stack dump of a running process, ``python -m profiling.sampling dump
    PID`` (Python 3.15+, PEP 799: no install, the same ptrace permission as py-spy); None before 3.15.

    It prints like a traceback, the most recent call last. Used in
    [08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand)
    and by the doctor's "stack dumps" check.

    >>> command = profiling_dump_command(1234)
    >>> command is None or command[1:] == ["-m", "profiling.sampling", "dump", "1234"]
    True
    """
    if sys.version_info < (3, 15):
        return None
    return [sys.executable, "-m", "profiling.sampling", "dump", str(pid)]


# --- 2. Exit codes --------------------------------------------------------------------------------

EXIT_CASES = ("returns", "sys.exit(3)", "raises", "os._exit(7)", "segfault", "SIGTERM", "SIGKILL")


def exit_by(case: str) -> None:
    """End this process in one of the :data:`EXIT_CASES` ways (run it in a child!).

    Used in [08 · What the parent sees](../notebooks/08_debugging_and_pitfalls.ipynb#what-the-parent-sees-exit-codes).

    >>> exit_by("returns")
    """
    if case == "returns":
        return
    if case == "sys.exit(3)":
        sys.exit(3)
    if case == "raises":
        raise ValueError("the child raised on purpose")
    if case == "os._exit(7)":
        os._exit(7)  # no cleanup, no atexit, no flushing: what a C library's exit() looks like too
    if case == "segfault":
        faulthandler._sigsegv()  # a real SIGSEGV, as a crashing C extension would cause
    if case in ("SIGTERM", "SIGKILL"):
        os.kill(os.getpid(), getattr(signal, case))  # as `kill` or the OOM killer would
        raise RuntimeError(
            f"{case} sent to itself was not delivered"
        )  # POSIX delivers it before kill returns
    raise ValueError(f"case must be one of {EXIT_CASES}, got {case!r}")


def exit_on_rank(rank: int, case: str, failing_rank: int = 1) -> None:
    """``mp.spawn`` worker: rank ``failing_rank`` ends by :func:`exit_by` ``(case)``, the others return.

    Used in [08 · What the parent sees](../notebooks/08_debugging_and_pitfalls.ipynb#what-the-parent-sees-exit-codes).

    >>> exit_on_rank(0, "SIGKILL")  # rank 0 just returns
    """
    if rank == failing_rank:
        exit_by(case)


# --- 3. Leftovers and orphans (section 3, appendices A and B) ------------------------------------


def sleep_for(seconds: float) -> None:
    """Sleep ``seconds``: a child that is still busy when its parent goes away.

    Used in [08 · Leave nothing behind](../notebooks/08_debugging_and_pitfalls.ipynb#leave-nothing-behind-reap-in-finally-and-where-signals-go).

    >>> sleep_for(0)
    """
    time.sleep(seconds)


def wait_for_status(pid: int, status: str, timeout: float = 10.0) -> str:
    """Poll psutil until process ``pid`` has ``status`` (e.g. ``"zombie"``); return the last status seen.

    Unlike ``Process.is_alive()`` this does not collect an exited child's status, so a zombie stays
    visible. A process that no longer exists reads as ``"gone"``.

    [08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand) (and
    [08 · Appendix A](../notebooks/08_debugging_and_pitfalls.ipynb#appendix-a-the-stop-button-measured-on-a-second-kernel)).

    >>> wait_for_status(os.getpid(), "running", timeout=1) in ("running", "sleeping")
    True
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            seen = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            return "gone"
        if seen == status or time.monotonic() > deadline:
            return seen
        time.sleep(0.01)


def wait_until_signalled(rank: int, name: str, ready_dir: str, seconds: float = 120.0) -> None:
    """Write this process's pid to ``ready_dir/name``, then sleep: a long-running child, ready to watch.

    ``rank`` comes first so ``mp.spawn`` / ``start_processes`` can start it too (they pass the rank).

    Notebook 08, appendices A and B.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as ready:
    ...     wait_until_signalled(0, "me", ready, seconds=0)
    ...     int(Path(ready, "me").read_text()) == os.getpid()
    True
    """
    _write_at_once(Path(ready_dir, name), str(os.getpid()))
    time.sleep(seconds)


def _write_at_once(path: Path, text: str) -> None:
    """Write ``text`` so that a reader sees the whole file or none (a rename is atomic)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def read_pids(ready_dir: str, names: Sequence[str], timeout: float = 60.0) -> dict[str, int]:
    """Wait until every child in ``names`` wrote its pid into ``ready_dir``; return ``{name: pid}``.

    Used in [08 · Appendix A](../notebooks/08_debugging_and_pitfalls.ipynb#appendix-a-the-stop-button-measured-on-a-second-kernel).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as ready:
    ...     wait_until_signalled(0, "me", ready, seconds=0)
    ...     read_pids(ready, ["me"]) == {"me": os.getpid()}
    True
    """
    deadline = time.monotonic() + timeout
    files = {name: Path(ready_dir, name) for name in names}
    while not all(f.exists() for f in files.values()):  # written at once: a file that exists is whole
        if time.monotonic() > deadline:
            missing = [name for name, f in files.items() if not f.exists()]
            raise TimeoutError(f"not running after {timeout} s: {missing}")
        time.sleep(0.05)
    return {name: int(f.read_text()) for name, f in files.items()}


def seconds_until_exit(pids: dict[str, int], timeout: float = 15.0) -> dict[str, float | None]:
    """Watch processes until each has exited; seconds each took (None: still running at ``timeout``).

    A zombie counts as exited (it waits only for its parent to collect its status).

    Notebook 08, appendices A and B.

    >>> seconds_until_exit({"me": os.getpid()}, timeout=0.2)
    {'me': None}
    """
    start, left, took = time.monotonic(), dict(pids), {name: None for name in pids}
    while left and time.monotonic() - start < timeout:
        for name, pid in list(left.items()):
            if wait_for_status(pid, psutil.STATUS_ZOMBIE, timeout=0) in ("gone", psutil.STATUS_ZOMBIE):
                took[name] = time.monotonic() - start
                del left[name]
        time.sleep(0.02)
    return took


_ORPHAN_KINDS = ("plain fork child", "mp.spawn child", "DataLoader worker")


def make_orphans(ready_dir: str) -> None:
    """Start a plain fork child, an ``mp.spawn`` child and a DataLoader worker, then die by SIGKILL.

    Run it as a script (Linux): each child has written its pid into ``ready_dir`` before we die.
    Not run here: it kills the process that calls it.

    Used in [08 · Appendix B](../notebooks/08_debugging_and_pitfalls.ipynb#appendix-b-orphans-after-a-sigkill).

    >>> make_orphans(tempfile.mkdtemp())  # doctest: +SKIP
    """
    import torch.multiprocessing as tmp
    from torch.utils.data import DataLoader

    from helpers.dataloading import WhoLoadedMe

    plain = mp.get_context("fork").Process(target=wait_until_signalled, args=(0, _ORPHAN_KINDS[0], ready_dir))
    plain.start()
    tmp.start_processes(
        wait_until_signalled, args=(_ORPHAN_KINDS[1], ready_dir), join=False, start_method="spawn"
    )
    batches = iter(DataLoader(WhoLoadedMe(4), batch_size=1, num_workers=1, multiprocessing_context="fork"))
    worker_pid = int(next(batches)[3])  # WhoLoadedMe's items say which process loaded them
    _write_at_once(Path(ready_dir, _ORPHAN_KINDS[2]), str(worker_pid))
    read_pids(ready_dir, _ORPHAN_KINDS)  # the spawn child has set PR_SET_PDEATHSIG once it is running
    os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no reaping: as the OOM killer would


def find_processes(marker: str) -> list[psutil.Process]:
    """Every process on this machine whose command line contains ``marker`` (this one excluded).

    The way to find leftovers that are no longer your children: an orphan is re-parented to
    PID 1 (or a subreaper), so ``live_children()`` cannot see it.

    Notebook 08, appendices A and B.

    >>> find_processes("no-such-marker-1f2e3d")
    []
    """
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if proc.pid != os.getpid() and marker in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
    return found


def orphan_demo(timeout: float = 60.0, watch: float = 10.0) -> dict:
    """Run :func:`make_orphans` in a script; watch what becomes of each child once the script is dead.

    Returns the script's exit code, the seconds the children torch guards (``mp.spawn``'s, the
    DataLoader's) took to exit (None: still running after ``watch`` s), whether the plain child lived
    on as an orphan, whether a scan of command lines found it, and that we killed it.

    Used in [08 · Appendix B](../notebooks/08_debugging_and_pitfalls.ipynb#appendix-b-orphans-after-a-sigkill).

    >>> demo = orphan_demo()  # doctest: +SKIP
    >>> demo["orphan_alive"], demo["cleaned_up"]  # doctest: +SKIP
    (True, True)
    """
    with tempfile.TemporaryDirectory(prefix="tmp-orphan-") as workdir:
        script = Path(workdir) / "orphan_maker.py"
        script.write_text(
            f"from helpers.debugging import make_orphans\nif __name__ == '__main__':\n"
            f"    make_orphans({workdir!r})\n"
        )
        # TMPDIR: the error file torch's mp.spawn child writes when its parent's death interrupts it
        # goes with workdir. stdout not a pipe: the orphans keep inherited fds open.
        env = {**os.environ, "TMPDIR": workdir}
        with open(os.devnull, "w") as sink:
            done = subprocess.run(
                [sys.executable, str(script)], stdout=sink, env=env, timeout=timeout, check=False
            )
        pids = read_pids(workdir, _ORPHAN_KINDS, timeout=1)
        orphan = pids.pop(_ORPHAN_KINDS[0])
        lived = seconds_until_exit(pids, timeout=watch)  # the children torch's launchers guard
        orphan_alive = wait_for_status(orphan, "running", timeout=0) not in ("gone", "zombie")
        found = find_processes(str(script))
        for proc in found:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        _gone, alive = psutil.wait_procs(found, timeout=5)
        return {
            "script_exitcode": done.returncode,
            "seconds_to_exit": lived,
            "orphan_alive": orphan_alive,
            "found_by_scan": orphan in [p.pid for p in found],
            "cleaned_up": not alive and not find_processes(str(script)),
        }


# --- Logging from children (appendix D) ---------------------------------------------------------------------


def log_from_child(rank: int, log_queue: queue.Queue | multiprocessing.queues.Queue) -> int:
    """Send this child's log records to ``log_queue`` through a ``QueueHandler``; return the rank.

    Used in [08 · Appendix D](../notebooks/08_debugging_and_pitfalls.ipynb#appendix-d-logs-from-children).

    >>> import queue
    >>> q = queue.Queue()
    >>> log_from_child(0, q), q.get_nowait().getMessage()
    (0, 'rank 0 starting')
    """
    logger = logging.getLogger(f"child.{rank}")
    logger.handlers[:] = [logging.handlers.QueueHandler(log_queue)]
    logger.setLevel(logging.INFO)
    logger.propagate = False  # a fork child inherited the parent's handlers: don't log twice
    logger.info("rank %d starting", rank)
    logger.warning("rank %d done", rank)
    return rank


class ListHandler(logging.Handler):
    """A handler that keeps the records it receives, in ``.records``.

    Used in [08 · Appendix D](../notebooks/08_debugging_and_pitfalls.ipynb#appendix-d-logs-from-children).

    >>> handler = ListHandler()
    >>> handler.handle(logging.makeLogRecord({"msg": "hi"})) and handler.records[0].msg
    'hi'
    """

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep ``record`` (``handle`` calls this after the handler's filters and lock).

        >>> handler = ListHandler()
        >>> handler.emit(logging.makeLogRecord({"msg": "kept"}))
        >>> [r.getMessage() for r in handler.records]
        ['kept']
        """
        self.records.append(record)
