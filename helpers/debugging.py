"""Workers and tools for notebook 08 (debugging and pitfalls): hangs, exit codes, leftovers, logging.

Everything that runs in a child lives here (importable by spawn and forkserver children); every
wait is bounded, and every process these functions start is gone when they return.

Example::

    >>> from helpers.debugging import what_the_parent_sees
    >>> what_the_parent_sees("raises", method="spawn").exitcode
    1
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import logging.handlers
import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from helpers.processes import ChildResult, reap, run_python_script, run_with_deadline

if TYPE_CHECKING:
    import multiprocessing.queues
    import multiprocessing.synchronize
    import queue

__all__ = [
    "take_lock_twice",
    "stuck_with_watchdog",
    "StackDump",
    "py_spy_path",
    "dump_stuck_child",
    "EXIT_CASES",
    "exit_by",
    "what_the_parent_sees",
    "headline",
    "explain_exit",
    "sleep_for",
    "wait_for_status",
    "daemon_child_error",
    "orphan_demo",
    "find_processes",
    "matmul_work",
    "oversubscription_grid",
    "log_from_child",
    "print_later",
    "ListHandler",
    "exit_on_rank",
    "wait_until_signalled",
    "read_pids",
    "seconds_until_exit",
    "make_orphans",
    "mismatched_all_reduce",
]


# --- 1. Hangs -------------------------------------------------------------------------------------


def take_lock_twice(ready: threading.Event | multiprocessing.synchronize.Event | None = None) -> None:
    """Deadlock on purpose: acquire a non-reentrant ``threading.Lock`` twice. Never returns.

    ``ready`` (an Event), when given, is set just before the second acquire.
    Not run here: it hangs on purpose (run it in a child with a deadline).

    Notebook 08, section 1.

    >>> hung = run_with_deadline(take_lock_twice, timeout=2)  # doctest: +SKIP
    >>> hung.timed_out  # doctest: +SKIP
    True
    """
    lock = threading.Lock()
    lock.acquire()
    if ready is not None:
        ready.set()
    lock.acquire()  # blocks forever: the classic self-deadlock


def stuck_with_watchdog(dump_after: float = 1.0) -> None:
    """Arm ``faulthandler.dump_traceback_later`` (a watchdog thread), then deadlock.

    After ``dump_after`` seconds the watchdog writes every thread's stack to stderr, while the
    process stays stuck: the parent's deadline then ends it.
    Not run here: it hangs on purpose (run it in a child with a deadline).

    Notebook 08, section 1.

    >>> hung = run_with_deadline(stuck_with_watchdog, kwargs={"dump_after": 0.5}, timeout=5)  # doctest: +SKIP
    >>> hung.timed_out, "in take_lock_twice" in hung.output  # doctest: +SKIP
    (True, True)
    """
    faulthandler.dump_traceback_later(dump_after, exit=False)
    take_lock_twice()


DUMP_END = "-- end of stack dump --"


def _stuck_on_signal(ready, stack_file: str) -> None:
    """Register a stack dump on SIGUSR1 into ``stack_file``, then deadlock.

    faulthandler writes the stacks from C, in many small writes, whatever the process is doing;
    ``chain=True`` then calls the previous handler, a Python one that appends ``DUMP_END``, so a
    reader knows the dump is complete (the blocked ``acquire`` is interrupted to run it).
    """
    sink = open(stack_file, "w")  # noqa: SIM115 (must stay open for faulthandler)
    signal.signal(signal.SIGUSR1, lambda signum, frame: print(DUMP_END, file=sink, flush=True))
    faulthandler.register(signal.SIGUSR1, file=sink, all_threads=True, chain=True)
    take_lock_twice(ready)


def _wait_until_blocked(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` sleeps (blocked in a wait, not running); False past ``timeout``."""
    process, deadline = psutil.Process(pid), time.monotonic() + timeout
    while process.status() != psutil.STATUS_SLEEPING:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@dataclass
class StackDump:
    """The stacks of a stuck child, as one tool saw them; ``ok`` False means ``text`` says why not.

    Notebook 08, section 1.
    """

    tool: str
    ok: bool
    text: str


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def py_spy_path() -> str | None:
    """The ``py-spy`` executable: next to this interpreter (a venv's bin/) or on PATH; None if absent.

    Notebook 08, section 1.

    >>> py_spy_path() is None or py_spy_path().endswith("py-spy")
    True
    """
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def dump_stuck_child(tool: str = "signal", method: str = "spawn", timeout: float = 30.0) -> StackDump:
    """Start a deliberately deadlocked child, read its stacks with ``tool``, then kill it.

    - ``"signal"``: the child registered ``faulthandler.register(SIGUSR1)``; we send SIGUSR1 and
      read what it wrote. Needs code in the child, prepared in advance.
    - ``"py-spy"``: ``py-spy dump --pid PID`` reads the stacks from outside (ptrace); nothing needed
      in the child. Not installed, or not permitted (containers without ptrace): ``ok`` is False and
      ``text`` says why.

    Notebook 08, section 1.

    >>> dump = dump_stuck_child("signal", method="spawn")
    >>> dump.ok, "take_lock_twice" in dump.text
    (True, True)
    """
    if tool not in ("signal", "py-spy"):
        raise ValueError(f"tool must be 'signal' or 'py-spy', got {tool!r}")
    spy = py_spy_path()
    if tool == "py-spy" and spy is None:
        return StackDump(tool, False, "py-spy is not installed (pip install py-spy)")
    ctx = mp.get_context(method)
    ready = ctx.Event()
    with tempfile.TemporaryDirectory(prefix="tmp-stacks-") as workdir:
        stack_file = os.path.join(workdir, "stacks.txt")
        child = ctx.Process(target=_stuck_on_signal, args=(ready, stack_file), name="stuck-child")
        child.start()
        try:
            if not (ready.wait(timeout) and _wait_until_blocked(child.pid, timeout)):
                return StackDump(tool, False, f"the child did not reach its deadlock within {timeout} s")
            if tool == "signal":
                os.kill(child.pid, signal.SIGUSR1)
                deadline = time.monotonic() + timeout
                while DUMP_END not in (text := Path(stack_file).read_text()):
                    if time.monotonic() > deadline:
                        return StackDump(tool, False, f"no complete dump within {timeout} s: {text!r}")
                    time.sleep(0.01)
                return StackDump(tool, True, text.replace(DUMP_END + "\n", ""))
            done = subprocess.run(
                [spy, "dump", "--pid", str(child.pid)], capture_output=True, text=True, timeout=timeout
            )
            if done.returncode != 0:
                return StackDump(tool, False, f"py-spy failed ({done.returncode}): {done.stderr.strip()}")
            return StackDump(tool, True, _ANSI.sub("", done.stdout))  # py-spy colours its output
        finally:
            reap([child], timeout=0)


# --- 2. Exit codes --------------------------------------------------------------------------------

EXIT_CASES = ("returns", "sys.exit(3)", "raises", "os._exit(7)", "segfault", "SIGTERM", "SIGKILL")


def exit_by(case: str) -> None:
    """End this process in one of the :data:`EXIT_CASES` ways (run it in a child!).

    Notebook 08, section 2.

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
        faulthandler.enable()  # prints the Python stack on the way down
        faulthandler._sigsegv()  # a real SIGSEGV, as a crashing C extension would cause
    if case in ("SIGTERM", "SIGKILL"):
        os.kill(os.getpid(), getattr(signal, case))  # as `kill` or the OOM killer would
        time.sleep(5)
    raise ValueError(f"case must be one of {EXIT_CASES}, got {case!r}")


def what_the_parent_sees(case: str, method: str = "spawn", timeout: float = 30.0) -> ChildResult:
    """Run :func:`exit_by` ``(case)`` in a child; return its exit code and captured output.

    Notebook 08, section 2.

    >>> what_the_parent_sees("SIGKILL", method="spawn").exitcode
    -9
    """
    if case not in EXIT_CASES:
        raise ValueError(f"case must be one of {EXIT_CASES}, got {case!r}")
    return run_with_deadline(exit_by, args=(case,), method=method, timeout=timeout)


def exit_on_rank(rank: int, case: str, failing_rank: int = 1) -> None:
    """``mp.spawn`` worker: rank ``failing_rank`` ends by :func:`exit_by` ``(case)``, the others return.

    Notebook 08, section 2.

    >>> exit_on_rank(0, "SIGKILL")  # rank 0 just returns
    """
    if rank == failing_rank:
        exit_by(case)


def headline(output: str) -> str:
    r"""The line of a child's output that says what went wrong (an error or a fatal signal), or "".

    Notebook 08, section 2.

    >>> headline("Traceback (most recent call last):\n  ...\nValueError: boom\n")
    'ValueError: boom'
    >>> headline("Fatal Python error: Segmentation fault\n\nCurrent thread ...")
    'Fatal Python error: Segmentation fault'
    """
    lines = output.strip().splitlines()
    for line in lines:
        if line.startswith("Fatal Python error"):
            return line
    errors = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception|Interrupt|Exit)\b", line)]
    return errors[-1] if errors else ""


_MEANING = {
    "returns": "0: the function returned normally",
    "sys.exit(3)": "the code given to sys.exit (SystemExit is not reported as an error)",
    "raises": "1: an uncaught exception; multiprocessing printed the traceback on the child's stderr",
    "os._exit(7)": "the code given to os._exit: no traceback, no cleanup, no message",
    "segfault": "-11: killed by signal 11 (SIGSEGV); only faulthandler's dump says where",
    "SIGTERM": "-15: killed by SIGTERM (what Process.terminate() sends)",
    "SIGKILL": "-9: killed by SIGKILL (Process.kill(), or the kernel's OOM killer): no chance to clean up",
}


def explain_exit(case: str = "raises", method: str = "spawn") -> int | None:
    """Widget callback of notebook 08: run one case, print the exit code, its meaning, the output's end.

    >>> explain_exit("os._exit(7)", method="spawn")
    exit code 7 -> the code given to os._exit: no traceback, no cleanup, no message
    7
    """
    result = what_the_parent_sees(case, method=method)
    print(f"exit code {result.exitcode} -> {_MEANING[case]}")
    if headline(result.output):
        print("the child wrote:", headline(result.output))
    return result.exitcode


# --- 3. Orphans and leftovers ---------------------------------------------------------------------


def sleep_for(seconds: float) -> None:
    """Sleep ``seconds``: a child that is still busy when its parent goes away.

    Notebook 08, sections 3 and 5.

    >>> sleep_for(0)
    """
    time.sleep(seconds)


def wait_for_status(pid: int, status: str, timeout: float = 10.0) -> str:
    """Poll psutil until process ``pid`` has ``status`` (e.g. ``"zombie"``); return the last status seen.

    Unlike ``Process.is_alive()`` this does not collect an exited child's status, so a zombie stays
    visible. A process that no longer exists reads as ``"gone"``.

    Notebook 08, section 3.

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


def _try_to_start_child(conn, method: str) -> None:
    try:
        child = mp.get_context(method).Process(target=sleep_for, args=(0,))
        child.start()
        child.join(10)
        conn.send("started a child")
    except AssertionError as error:
        conn.send(f"AssertionError: {error}")


def daemon_child_error(method: str = "spawn", timeout: float = 30.0) -> str:
    """Start a *daemon* process that tries to start a child of its own; return what happened.

    Notebook 08, section 3.

    >>> daemon_child_error("spawn")
    'AssertionError: daemonic processes are not allowed to have children'
    """
    ctx = mp.get_context(method)
    receiver, sender = ctx.Pipe(duplex=False)
    daemon = ctx.Process(target=_try_to_start_child, args=(sender, method), daemon=True)
    daemon.start()
    try:
        return receiver.recv() if receiver.poll(timeout) else f"no answer within {timeout} s"
    finally:
        reap([daemon], timeout=5)
        receiver.close()
        sender.close()


def wait_until_signalled(rank: int, name: str, ready_dir: str, seconds: float = 120.0) -> None:
    """Write this process's pid to ``ready_dir/name``, then sleep: a long-running child, ready to watch.

    ``rank`` comes first so ``mp.spawn`` / ``start_processes`` can start it too (they pass the rank).

    Notebook 08, sections 3 and 5.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as ready:
    ...     wait_until_signalled(0, "me", ready, seconds=0)
    ...     int(Path(ready, "me").read_text()) == os.getpid()
    True
    """
    Path(ready_dir, name).write_text(str(os.getpid()))
    time.sleep(seconds)


def read_pids(ready_dir: str, names: Sequence[str], timeout: float = 60.0) -> dict[str, int]:
    """Wait until every child in ``names`` wrote its pid into ``ready_dir``; return ``{name: pid}``.

    Notebook 08, section 5.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as ready:
    ...     wait_until_signalled(0, "me", ready, seconds=0)
    ...     read_pids(ready, ["me"]) == {"me": os.getpid()}
    True
    """
    deadline = time.monotonic() + timeout
    files = {name: Path(ready_dir, name) for name in names}
    while not all(f.exists() and f.read_text() for f in files.values()):
        if time.monotonic() > deadline:
            missing = [name for name, f in files.items() if not f.exists()]
            raise TimeoutError(f"not running after {timeout} s: {missing}")
        time.sleep(0.05)
    return {name: int(f.read_text()) for name, f in files.items()}


def seconds_until_exit(pids: dict[str, int], timeout: float = 15.0) -> dict[str, float | None]:
    """Watch processes until each has exited; seconds each took (None: still running at ``timeout``).

    A zombie counts as exited (it waits only for its parent to collect its status).

    Notebook 08, sections 3 and 5.

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

    Notebook 08, section 3.

    >>> make_orphans(tempfile.mkdtemp())  # doctest: +SKIP
    """
    import torch.multiprocessing as tmp
    from torch.utils.data import DataLoader

    from helpers.data import WhoLoadedMe

    plain = mp.get_context("fork").Process(target=wait_until_signalled, args=(0, _ORPHAN_KINDS[0], ready_dir))
    plain.start()
    tmp.start_processes(
        wait_until_signalled, args=(_ORPHAN_KINDS[1], ready_dir), join=False, start_method="spawn"
    )
    batches = iter(DataLoader(WhoLoadedMe(4), batch_size=1, num_workers=1, multiprocessing_context="fork"))
    worker_pid = int(next(batches)[3])  # WhoLoadedMe's items say which process loaded them
    Path(ready_dir, _ORPHAN_KINDS[2]).write_text(str(worker_pid))
    read_pids(ready_dir, _ORPHAN_KINDS)  # the spawn child has set PR_SET_PDEATHSIG once it is running
    os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no reaping: as the OOM killer would


def find_processes(marker: str) -> list[psutil.Process]:
    """Every process on this machine whose command line contains ``marker`` (this one excluded).

    The way to find leftovers that are no longer your children: an orphan is re-parented to
    PID 1 (or a subreaper), so ``live_children()`` cannot see it.

    Notebook 08, sections 3 and 5.

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

    Notebook 08, section 3.

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
        with open(os.devnull, "w") as sink:  # not a pipe: the orphans keep inherited fds open
            done = subprocess.run([sys.executable, str(script)], stdout=sink, timeout=timeout, check=False)
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


# --- 4. Oversubscription --------------------------------------------------------------------------


def matmul_work(rank: int, threads: int, reps: int, size: int, start_at: float) -> float:
    """Set ``threads``, wait until ``start_at`` (wall clock), run ``reps`` matmuls; return their seconds.

    Notebook 08, section 4.

    >>> matmul_work(0, threads=1, reps=2, size=64, start_at=0) > 0
    True
    """
    import torch

    torch.set_num_threads(threads)
    a = torch.randn(size, size)
    time.sleep(max(0.0, start_at - time.time()))  # start together, so processes really compete
    begin = time.perf_counter()
    for _ in range(reps):
        a = (a @ a).clamp_(-1, 1)
    return time.perf_counter() - begin


def _grid_here(processes, threads, reps, size, timeout) -> dict:
    """In a parent that never ran a parallel torch op: fork children are safe at any thread count."""
    ctx = mp.get_context("fork")
    grid = {}
    for p in processes:
        for t in threads:
            with ctx.Pool(p) as pool:
                start_at = time.time() + 0.3
                jobs = pool.starmap_async(matmul_work, [(r, t, reps, size, start_at) for r in range(p)])
                seconds = jobs.get(timeout)
            grid[f"{p}x{t}"] = p * reps / max(seconds)  # matmuls per second, all processes together
    return grid


def oversubscription_grid(
    processes: Sequence[int] = (1, 2, 4),
    threads: Sequence[int] = (1, 2),
    reps: int = 20,
    size: int = 256,
    timeout: float = 60.0,
) -> dict[tuple[int, int], float]:
    """Matmuls per second for each (processes, threads per process), all processes running at once.

    Runs in a fresh interpreter that imports torch but never runs a parallel op before it forks,
    so the fork children may use any thread count (see the OpenMP fork hang of notebooks 01, 04).

    >>> grid = oversubscription_grid(processes=(1,), threads=(1,), reps=2, size=32)
    >>> list(grid)
    [(1, 1)]
    """
    code = (
        "import json, torch\n"
        "from helpers.debugging import _grid_here\n"
        "if __name__ == '__main__':\n"
        f"    print(json.dumps(_grid_here({list(processes)}, {list(threads)}, {reps}, {size}, {timeout})))\n"
    )
    done = run_python_script(code, timeout=timeout * 2)
    if done.returncode != 0:
        raise RuntimeError(f"the grid run failed:\n{done.stderr[-2000:]}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    return {tuple(int(x) for x in key.split("x")): value for key, value in raw.items()}


# --- 6. Distributed runs: what torch adds ---------------------------------------------------------


def mismatched_all_reduce(timeout: float = 30.0) -> None:
    """A torchrun worker with a classic bug: ranks all-reduce tensors of different shapes.

    Reads ``RANK``/``WORLD_SIZE`` (and the rendezvous address) from the environment torchrun sets.
    With ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` gloo checks every collective across ranks first and raises
    a ``RuntimeError`` that names both shapes. Not run here: it needs a torchrun world.

    Notebook 08, section 7.

    >>> mismatched_all_reduce()  # doctest: +SKIP
    """
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    try:
        rank = dist.get_rank()
        dist.all_reduce(torch.ones(rank + 1))  # rank 0 sends 1 number, rank 1 sends 2: a bug
    finally:
        dist.destroy_process_group()


# --- 5. Logging from children ---------------------------------------------------------------------


def print_later(message: str, seconds: float) -> None:
    """Sleep ``seconds``, then print ``message``: output that arrives after its cell has finished.

    Notebook 08, section 6.

    >>> print_later("hello", 0)
    hello
    """
    time.sleep(seconds)
    print(message, flush=True)


def log_from_child(rank: int, log_queue: queue.Queue | multiprocessing.queues.Queue) -> int:
    """Send this child's log records to ``log_queue`` through a ``QueueHandler``; return the rank.

    Notebook 08, section 6.

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

    Notebook 08, section 6.

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
