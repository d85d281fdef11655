"""Fork hazards on the CPU: what ``fork()`` copies into a child and what it leaves behind.

``fork()`` copies the parent's memory and only the calling thread. A runtime that keeps state
about other threads arrives in the child describing threads that do not exist there: the CPU twin
of "Cannot re-initialize CUDA in forked subprocess" (``helpers.cuda``). Notebook 04 shows:

- GNU OpenMP (torch's Linux pip wheels): after the parent ran a parallel op, a fork child's own
  parallel op hangs forever (:func:`parallel_op`, :class:`HangReport`, :func:`plot_fixes`,
  :func:`hang_demo`; :func:`fork_hang_report` adds the stuck child's stack and thread states).
  It needs Linux with GNU libgomp and at least two CPUs (more than one torch thread); with
  another OpenMP runtime (macOS: LLVM libomp) or one CPU the child need not hang;
- a ``threading.Lock`` held by another thread at the fork stays locked in the child, and the
  child's :func:`take_lock` can only time out;
- Python 3.12+ warns about forking a multi-threaded process, but its default filters hide the
  warning (:func:`fork_warning`).

Example::

    >>> import threading
    >>> from helpers.fork_hazards import take_lock
    >>> take_lock(threading.Lock(), timeout=1)  # free: taken and released, exit code 0
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing as mp
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from helpers.processes import reap, run_python_script

if TYPE_CHECKING:  # matplotlib is imported inside plot_fixes: importing this module stays light
    from matplotlib.figure import Figure

__all__ = [
    "parallel_op",
    "HangReport",
    "fork_hang_report",
    "plot_fixes",
    "hang_demo",
    "take_lock",
    "FORK_WARNING_SCRIPT",
    "FORK_WARNING_TEXT",
    "fork_warning",
]


def parallel_op(size: int = 4_000_000, threads: int | None = None) -> float:
    """Run a multi-threaded CPU kernel (a float64-to-float32 copy of ``size`` elements).

    With GNU OpenMP, a *fork* child whose parent already ran such a kernel hangs here forever
    unless ``threads=1`` is set first
    ([04 · The CPU twin](../notebooks/04_fork_and_cuda.ipynb#the-cpu-twin-openmp-after-fork); Linux, GNU
    libgomp, 2+ CPUs).

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

    [04 · The CPU twin](../notebooks/04_fork_and_cuda.ipynb#the-cpu-twin-openmp-after-fork) records its
    children in them (and plots them); the appendix adds the
    stack and thread states that :func:`fork_hang_report` collects.
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
    Used in [04 · Appendix: where the fork child is stuck](../notebooks/04_fork_and_cuda.ipynb#appendix-where-the-fork-child-is-stuck)
    and the widget of [04 · The CPU twin](../notebooks/04_fork_and_cuda.ipynb#the-cpu-twin-openmp-after-fork).

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


def plot_fixes(reports: list[HangReport]) -> Figure:
    """Bar chart: seconds per variant; a hung child's bar reaches its deadline and is hatched.
    [04 · The CPU twin](../notebooks/04_fork_and_cuda.ipynb#the-cpu-twin-openmp-after-fork), the fixes side by side.

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


def take_lock(lock: threading.Lock, timeout: float = 2.0) -> None:
    """Fork child of
    [04 · The general principle](../notebooks/04_fork_and_cuda.ipynb#the-general-principle-a-lock-held-by-another-thread):
    take ``lock`` within ``timeout`` s; exit code 1 if not.

    A fork child gets a copy of the parent's lock in the state it had at the fork. If another
    thread held it then, no thread in the child will ever release it: ``acquire`` can only time
    out. (The lock reaches the child by fork's memory copy; it cannot be pickled for spawn.)

    >>> held = threading.Lock()
    >>> held.acquire()
    True
    >>> take_lock(held, timeout=0.1)
    Traceback (most recent call last):
    ...
    SystemExit: 1
    """
    if not lock.acquire(timeout=timeout):
        sys.exit(1)  # held since before the fork: nobody in this process will release it
    lock.release()


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
    without, Python's default filters apply. Used in
    [04 · Appendix: Python 3.12's fork warning](../notebooks/04_fork_and_cuda.ipynb#appendix-python-3-12-s-fork-warning).

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
