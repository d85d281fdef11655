"""Fork hazards on the CPU: what ``fork()`` copies into a child and what it leaves behind.

``fork()`` copies the parent's memory and only the calling thread. A runtime that keeps state
about other threads arrives in the child describing threads that do not exist there. Notebook 04
shows three cases live on any Linux machine, the CPU twin of "Cannot re-initialize CUDA in forked
subprocess" (``helpers.cuda``):

- GNU OpenMP (torch's Linux pip wheels): after the parent ran a parallel op, a fork child's own
  parallel op hangs forever (:func:`fork_hang_report` over :data:`FIX_VARIANTS`);
- a ``threading.Lock`` held by another thread at the fork stays locked in the child
  (:func:`fork_while_lock_held`);
- Python 3.12+ warns about forking a multi-threaded process, but its default filters hide the
  warning (:func:`fork_warning`).

Example::

    >>> from helpers.fork_hazards import fork_while_lock_held
    >>> fork_while_lock_held(held=False).child_acquired
    True
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing as mp
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from helpers.processes import reap, run_python_script, run_with_deadline

if TYPE_CHECKING:  # matplotlib is imported inside plot_fixes: importing this module stays light
    from matplotlib.figure import Figure

__all__ = [
    "parallel_op",
    "HangReport",
    "fork_hang_report",
    "FIX_VARIANTS",
    "plot_fixes",
    "hang_demo",
    "LockReport",
    "fork_while_lock_held",
    "FORK_WARNING_SCRIPT",
    "FORK_WARNING_TEXT",
    "fork_warning",
]


def parallel_op(size: int = 4_000_000, threads: int | None = None) -> float:
    """Run a multi-threaded CPU kernel (a float64-to-float32 copy of ``size`` elements).

    With GNU OpenMP, a *fork* child whose parent already ran such a kernel hangs here forever
    unless ``threads=1`` is set first (notebook 04, section 2).

    >>> parallel_op(1000, threads=1) != 0.0
    True
    """
    if threads is not None:
        torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    return float(torch.randn(size, dtype=torch.float64, generator=generator).float().sum())


# --------------------------------------------------------------------------------------------------
# The CPU twin: GNU OpenMP after fork
# --------------------------------------------------------------------------------------------------


@dataclass
class HangReport:
    """One child that ran :func:`parallel_op`, and what became of it.

    Notebook 04 section 2 prints and asserts them.
    """

    label: str
    method: str
    threads: int | None  # torch.set_num_threads in the child before the op; None: inherited
    finished: bool  # the op returned and the child exited 0 before the deadline
    seconds: float  # start() to finished, or to the deadline
    deadline: float
    exitcode: int | None = 0  # negative: killed by that signal (the deadline's SIGTERM)
    stack: str = ""  # faulthandler's dump from inside the child, when it was still running
    tasks: list[str] = field(default_factory=list)  # the child's threads: "tid state wchan" (Linux)
    timed_out: bool = False  # still running at the deadline (then killed)

    @property
    def hung(self) -> bool:
        """True when the child was still running at the deadline (and was killed)."""
        return self.timed_out

    def summary(self) -> str:
        """One line for printing.

        >>> HangReport("spawn", "spawn", None, True, 1.234, 60.0).summary()
        'spawn                            finished in  1.23 s'
        """
        if self.finished:
            return f"{self.label:<32} finished in {self.seconds:5.2f} s"
        if not self.timed_out:
            return f"{self.label:<32} FAILED: exit code {self.exitcode} after {self.seconds:.2f} s"
        return f"{self.label:<32} HUNG: still running at the {self.deadline:.0f} s deadline, killed"


def _op_with_watchdog(stack_path: str, dump_after: float, threads: int | None) -> None:
    """Child side of :func:`fork_hang_report`: arm faulthandler, then run the parallel op.

    If the op is still running after ``dump_after`` seconds, faulthandler (a C-level timer thread,
    which works while the main thread is stuck in native code) writes the Python stack to the file.
    """
    with open(stack_path, "w") as sink:
        faulthandler.dump_traceback_later(dump_after, file=sink)
        try:
            parallel_op(threads=threads)
        finally:
            faulthandler.cancel_dump_traceback_later()


def _task_states(pid: int) -> list[str]:
    """``tid state wchan`` for each thread of ``pid``, from /proc (``[]`` where unavailable)."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        with contextlib.suppress(OSError, IndexError):
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = (task / "wchan").read_text().strip() if (task / "wchan").exists() else "?"
            lines.append(f"thread {task.name}: state {state}, waiting in kernel function {wchan or '?'}")
    return lines


def fork_hang_report(
    method: str = "fork", threads: int | None = None, timeout: float = 3.0, label: str | None = None
) -> HangReport:
    """Run the parallel op in one ``method`` child with a deadline; if it hangs, say where.
    Notebook 04 section 2 (the hang, and the fixes side by side).

    The child arms ``faulthandler.dump_traceback_later`` at half the deadline, so a stuck child
    leaves its Python stack in a temp file; the parent also reads the child's thread states from
    ``/proc`` just before killing it. Call :func:`parallel_op` in the caller
    first to reproduce the hang (the caller's OpenMP pool must have been used before the fork).

    >>> r = fork_hang_report("spawn", threads=1, timeout=60)
    >>> r.finished, r.stack
    (True, '')
    """
    if method not in mp.get_all_start_methods():
        raise ValueError(f"start method {method!r} is not available here: {mp.get_all_start_methods()}")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    ctx = mp.get_context(method)
    label = label or f"{method}, threads={'inherited' if threads is None else threads}"
    with tempfile.TemporaryDirectory(prefix="tmp-fork-hang-") as workdir:
        stack_path = Path(workdir) / "stack.txt"
        proc = ctx.Process(target=_op_with_watchdog, args=(str(stack_path), timeout / 2, threads))
        start = time.monotonic()
        try:
            proc.start()
            proc.join(timeout)
            seconds = time.monotonic() - start
            alive = proc.is_alive()
            tasks = _task_states(proc.pid) if alive else []
        finally:
            (exitcode,) = reap([proc], timeout=0)
        stack = stack_path.read_text() if stack_path.exists() else ""
    finished = not alive and exitcode == 0
    return HangReport(
        label, method, threads, finished, seconds, timeout, exitcode, stack.strip(), tasks, alive
    )


# (label, method, threads in the child): the hang and its three fixes, side by side.
FIX_VARIANTS = (
    ("fork, inherited threads (hangs)", "fork", None),
    ("fork, 1 thread in the child", "fork", 1),
    ("spawn", "spawn", None),
    ("forkserver", "forkserver", None),
)


def plot_fixes(reports: list[HangReport]) -> Figure:
    """Bar chart: seconds per variant; a hung child's bar reaches its deadline and is hatched.
    Notebook 04 section 2, the fixes side by side.

    >>> fig = plot_fixes([HangReport("spawn", "spawn", None, True, 1.2, 60.0)])
    """
    from helpers.plotting import METHOD_COLORS, new_figure

    fig, ax = new_figure("A parallel op in a child, after the parent ran one", "", "seconds")
    fig.set_size_inches(8, 3.8)
    labels = [r.label.replace(" (hangs)", "").replace(", ", "\n") for r in reports]
    colors = [METHOD_COLORS.get(r.method, "#666666") for r in reports]
    bars = ax.bar(labels, [r.seconds for r in reports], color=colors)
    texts = [
        f"hung: killed at\nthe {r.deadline:.0f} s deadline" if r.hung else f"{r.seconds:.2f} s"
        for r in reports
    ]
    ax.bar_label(bars, labels=texts, padding=2)
    ax.margins(y=0.2)
    for bar, report in zip(bars, reports, strict=True):
        if report.hung:
            bar.set_hatch("//")
            bar.set_alpha(0.6)
    return fig


def hang_demo(threads: int | None = None, method: str = "fork", timeout: float = 3.0) -> HangReport:
    """Widget callback for notebook 04: one child, ``threads`` set in it (None: inherited); print it.

    fork children get ``timeout``; spawn and forkserver children get 60 s more, for their start-up.

    >>> hang_demo(threads=1, method="spawn").finished
    spawn, threads=1                 finished in ...
    True
    """
    extra = 0.0 if method == "fork" else 60.0
    report = fork_hang_report(method, threads, timeout=timeout + extra)
    print(report.summary())
    if report.hung:
        frames = [line.strip() for line in report.stack.splitlines() if line.strip().startswith("File")]
        print("  stuck in:", frames[0] if frames else "(no stack dumped)")
        print("  " + "\n  ".join(report.tasks))
    return report


# --------------------------------------------------------------------------------------------------
# The general principle: a lock held by another thread at fork time
# --------------------------------------------------------------------------------------------------


@dataclass
class LockReport:
    """A fork child that tried to take a ``threading.Lock``; see :func:`fork_while_lock_held`.

    Notebook 04 section 3 prints and asserts it.
    """

    held_at_fork: bool
    child_acquired: bool
    timed_out: bool
    seconds: float
    output: str
    parent_acquired_after: bool  # the parent's own lock works again once the holder releases it


def _take_lock(lock) -> None:
    """Fork-child side of :func:`fork_while_lock_held` (the lock arrives unpickled: fork only)."""
    print("child: acquiring the lock ...", flush=True)
    lock.acquire()
    print("child: acquired it", flush=True)
    lock.release()


def fork_while_lock_held(held: bool = True, timeout: float = 2.0) -> LockReport:
    """Fork while another thread holds a plain ``threading.Lock``; the child tries to take it.
    Notebook 04 section 3.

    ``fork()`` copies the lock *in its locked state* but not the thread that would release it, so
    the child waits forever (here: until ``timeout``). With ``held=False`` the child takes it at once.

    >>> fork_while_lock_held(held=True, timeout=1).timed_out
    True
    """
    if "fork" not in mp.get_all_start_methods():
        raise ValueError("this demo needs the fork start method (Linux or macOS)")
    lock, holding, release = threading.Lock(), threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            holding.set()
            release.wait(timeout + 30)

    holder = threading.Thread(target=hold, name="lock-holder", daemon=True)
    if held:
        holder.start()
        holding.wait(10)
    try:
        result = run_with_deadline(_take_lock, args=(lock,), method="fork", timeout=timeout)
    finally:
        release.set()
        if held:
            holder.join(10)
    parent_acquired = lock.acquire(timeout=5)
    if parent_acquired:
        lock.release()
    return LockReport(
        held_at_fork=held,
        child_acquired="child: acquired it" in result.output,
        timed_out=result.timed_out,
        seconds=result.seconds,
        output=result.output.strip(),
        parent_acquired_after=parent_acquired,
    )


# Python 3.12+ warns when a multi-threaded process forks (CPython gh-100228). The warning is a
# DeprecationWarning attributed to multiprocessing/popen_fork.py, so Python's default filters hide it.
FORK_WARNING_TEXT = (
    "DeprecationWarning: This process (pid=...) is multi-threaded, use of fork() may lead to "
    "deadlocks in the child."
)
FORK_WARNING_SCRIPT = """\
import multiprocessing as mp, sys, threading, warnings

def work():
    pass

if __name__ == "__main__":
    if "--show-deprecation" in sys.argv:
        warnings.simplefilter("default", DeprecationWarning)   # what `python -W default` does
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()   # a second thread, as libraries start
    child = mp.get_context("fork").Process(target=work)
    child.start()
    child.join(30)
    stop.set()
    print("python", sys.version.split()[0], "| threads when forking: 2 | child exit code", child.exitcode)
"""


def fork_warning(show: bool = True, timeout: float = 60.0) -> list[str]:
    """Fork a child from a fresh, two-threaded interpreter; return what it printed (stderr first).

    With ``show`` the script turns DeprecationWarnings on (``warnings.simplefilter("default")``);
    without, Python's default filters apply. Notebook 04 section 3.

    >>> lines = fork_warning(show=False)
    >>> lines[-1].startswith("python"), any("multi-threaded" in line for line in lines)
    (True, False)
    """
    done = run_python_script(
        FORK_WARNING_SCRIPT, timeout=timeout, args=["--show-deprecation"] if show else []
    )
    if done.returncode != 0:
        raise RuntimeError(f"the fork-warning script failed:\n{done.stderr[-2000:]}")
    return done.stderr.splitlines() + done.stdout.splitlines()
