"""Fork versus an initialised runtime: CUDA on a GPU, and its CPU twin (OpenMP, locks) everywhere.

Notebook 04 and instructors' scripts run these demos. The CPU twin runs on any Linux machine; the
GPU demos need CUDA and each runs in a *fresh interpreter* (so the caller never initialises CUDA
and stays fork-safe), bounded by a timeout. From a shell, on a GPU machine::

    PYTHONPATH=. python -m helpers.cuda --output notebooks/transcripts/04_fork_and_cuda.txt

writes the recorded transcript that notebook 04 shows where CUDA is absent. Nothing here imports
Jupyter, and the package need not be installed (``PYTHONPATH`` pointing at the repository is enough).

Example::

    >>> from helpers.cuda import fork_while_lock_held
    >>> fork_while_lock_held(held=False).child_acquired
    True
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import faulthandler
import io
import json
import multiprocessing as mp
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import torch

from helpers.processes import reap, run_python_script, run_with_deadline
from helpers.start_methods import parallel_op

if TYPE_CHECKING:  # matplotlib is imported inside plot_fixes: importing this module stays light
    from matplotlib.figure import Figure

__all__ = [
    # the CPU twin
    "HangReport",
    "fork_hang_report",
    "FIX_VARIANTS",
    "openmp_fixes",
    "plot_fixes",
    "hang_demo",
    "LockReport",
    "fork_while_lock_held",
    "FORK_WARNING_SCRIPT",
    "FORK_WARNING_TEXT",
    "fork_warning",
    # the GPU demos (each in a fresh interpreter)
    "cuda_present",
    "gpu_info",
    "fork_after_cuda_init",
    "POISON_CALLS",
    "poison_table",
    "cuda_fixes",
    "cuda_ipc_queue",
    "broken_keep_alive",
    "per_process_devices",
    "run_gpu_demos",
    "check_gpu_results",
    # the recorded transcript
    "TRANSCRIPT",
    "TRANSCRIPT_COMMAND",
    "PENDING_MESSAGE",
    "format_transcript",
    "read_transcript",
    "read_transcript_text",
    "recorded_banner",
    "write_transcript",
    "main",
]

ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPT = ROOT / "notebooks" / "transcripts" / "04_fork_and_cuda.txt"
TRANSCRIPT_COMMAND = "PYTHONPATH=. python -m helpers.cuda --output notebooks/transcripts/04_fork_and_cuda.txt"
PENDING_MESSAGE = (
    "RECORDED GPU TRANSCRIPT: PENDING. This machine has no CUDA device, and no transcript recorded on\n"
    "a real GPU has been committed yet. It will be recorded on a GPU machine, from the repository\n"
    f"root, with:\n    {TRANSCRIPT_COMMAND}\nNothing below is GPU output: the CPU sections run live."
)
CUDA_REINIT_ERROR = "Cannot re-initialize CUDA in forked subprocess"

# --------------------------------------------------------------------------------------------------
# The CPU twin: GNU OpenMP after fork
# --------------------------------------------------------------------------------------------------


@dataclass
class HangReport:
    """One child that ran :func:`helpers.start_methods.parallel_op`, and what became of it."""

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

    The child arms ``faulthandler.dump_traceback_later`` at half the deadline, so a stuck child
    leaves its Python stack in a temp file; the parent also reads the child's thread states from
    ``/proc`` just before killing it. Call :func:`~helpers.start_methods.parallel_op` in the caller
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


def openmp_fixes(hang_timeout: float = 3.0, timeout: float = 60.0) -> list[HangReport]:
    """The hang and the fixes of :data:`FIX_VARIANTS`, each timed (methods missing here are skipped).

    The fork child with inherited threads gets ``hang_timeout``; the others get ``timeout``.
    Run :func:`~helpers.start_methods.parallel_op` in the caller first to make the hang happen.

    >>> [r.label for r in openmp_fixes(timeout=60)][-1] in ("forkserver", "spawn")
    True
    """
    reports = []
    for label, method, threads in FIX_VARIANTS:
        if method in mp.get_all_start_methods():
            deadline = hang_timeout if (method, threads) == ("fork", None) else timeout
            reports.append(fork_hang_report(method, threads, timeout=deadline, label=label))
    return reports


def plot_fixes(reports: list[HangReport]) -> Figure:
    """Bar chart: seconds per variant; a hung child's bar reaches its deadline and is hatched.

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
    """A fork child that tried to take a ``threading.Lock``; see :func:`fork_while_lock_held`."""

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


# Python 3.12+ warns when a process that has other threads forks (CPython gh-100228).
FORK_WARNING_TEXT = (
    "DeprecationWarning: This process (pid=...) is multi-threaded, use of fork() may lead to "
    "deadlocks in the child."
)
FORK_WARNING_SCRIPT = """\
import os, sys, threading, warnings

stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()   # a second thread, as libraries start
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    pid = os.fork()
    if pid == 0:
        os._exit(0)                                         # the child does nothing
os.waitpid(pid, 0)
stop.set()
print("python", sys.version.split()[0], "| threads when forking:", threading.active_count())
for warning in caught:
    print(f"{warning.category.__name__}: {warning.message}")
"""


def fork_warning(timeout: float = 60.0) -> list[str]:
    """Fork in a fresh, two-threaded interpreter; return the lines it printed (warnings included).

    >>> lines = fork_warning()
    >>> lines[0].startswith("python")
    True
    """
    done = run_python_script(FORK_WARNING_SCRIPT, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"the fork-warning script failed:\n{done.stderr[-2000:]}")
    return done.stdout.splitlines()


# --------------------------------------------------------------------------------------------------
# The GPU demos. Each *body* runs in a fresh interpreter started by _run_fresh; the public wrappers
# return plain dicts (JSON), so a script or a notebook can print, check or record them.
# --------------------------------------------------------------------------------------------------

_MARK = "@@helpers.cuda@@ "


def _fresh_env(extra: dict[str, str | None] | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _run_fresh(body: str, limit: float, env: dict[str, str | None] | None = None, **kwargs) -> dict:
    """Run ``helpers.cuda.<body>(**kwargs)`` in a fresh interpreter (own process group); bounded."""
    code = (
        "import json, sys\n"
        f"from helpers.cuda import {body} as body\n"
        f"print({_MARK!r} + json.dumps(body(**json.loads(sys.argv[1]))), flush=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(kwargs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_fresh_env(env),
        start_new_session=True,  # so a timeout can kill its children (spawned consumers) too
    )
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return {"error": f"timed out after {limit:.0f} s (killed)", "stderr": stderr[-1500:]}
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # nothing of it may outlive the demo
    for line in reversed(stdout.splitlines()):
        if line.startswith(_MARK):
            result = json.loads(line[len(_MARK) :])
            result["stderr"] = stderr[-1500:]
            return result
    return {"error": f"exit code {proc.returncode}", "stderr": stderr[-1500:]}


def cuda_present(timeout: float = 60.0) -> bool:
    """True when a CUDA device is usable; asked in a fresh interpreter, so this process stays clean.

    >>> isinstance(cuda_present(), bool)
    True
    """
    from helpers.environment import cuda_report

    return bool(cuda_report(timeout)["cuda_devices"])


def _error_line(error: BaseException) -> str:
    """``Type: first line of the message`` (the message may be empty, e.g. ``queue.Empty``)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__


def _failure(result: dict) -> str:
    """What went wrong in a fresh interpreter: its error and the last line of its stderr."""
    last = [line for line in result.get("stderr", "").splitlines() if line.strip()][-1:]
    return f"{result.get('error')} ({last[0].strip()[:200]})" if last else str(result.get("error"))


def _driver_version() -> str:
    smi = shutil.which("nvidia-smi")
    if smi:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            done = subprocess.run(
                [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            if done.returncode == 0 and done.stdout.strip():
                return done.stdout.strip().splitlines()[0]
    with contextlib.suppress(Exception):
        version = torch._C._cuda_getDriverVersion()  # e.g. 12040: the CUDA API the driver supports
        return f"CUDA driver API {version // 1000}.{version % 1000 // 10}"
    return "unknown"


def _body_info() -> dict:
    return {
        "device": torch.cuda.get_device_name(0),
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "driver": _driver_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def gpu_info(timeout: float = 120.0) -> dict:
    """Device name(s), driver, torch and CUDA versions, Python and the date: a transcript's header.

    Not run as a doctest: it needs a CUDA device.

    >>> sorted(gpu_info())  # doctest: +SKIP
    ['cuda_runtime', 'date', 'device', 'devices', 'driver', 'python', 'stderr', 'torch']
    """
    return _run_fresh("_body_info", timeout)


def _child_cuda_op(result_path: str) -> None:
    """Child side of the fork demos: report the bad-fork flag, try one CUDA op, write the outcome."""
    torch.set_num_threads(1)
    in_bad_fork = getattr(torch._C, "_cuda_isInBadFork", None)
    outcome = {"child_bad_fork": in_bad_fork() if in_bad_fork else None}
    try:
        x = torch.ones(2, device="cuda")
        torch.cuda.synchronize()
        outcome["child_outcome"] = f"ok (sum {float(x.sum()):.0f})"
    except Exception as error:  # noqa: BLE001 (whatever it is, it is the lesson)
        outcome["child_outcome"] = _error_line(error)
    Path(result_path).write_text(json.dumps(outcome))


def _cuda_op_in_child(method: str, timeout: float) -> dict:
    """Start one ``method`` child that tries a CUDA op; its outcome, exit code and seconds."""
    with tempfile.TemporaryDirectory(prefix="tmp-cuda-child-") as workdir:
        path = Path(workdir) / "outcome.json"
        result = run_with_deadline(_child_cuda_op, args=(str(path),), method=method, timeout=timeout)
        outcome = json.loads(path.read_text()) if path.exists() else {"child_outcome": "no outcome written"}
    if result.timed_out:
        outcome["child_outcome"] = f"timed out after {timeout:.0f} s (killed)"
    outcome.update(
        child_method=method, child_exitcode=result.exitcode, child_seconds=round(result.seconds, 2)
    )
    return outcome


def _body_fork_after_init(timeout: float) -> dict:
    torch.zeros(1, device="cuda")  # the parent initialises CUDA
    parent_initialized = torch.cuda.is_initialized()
    return {"parent_initialized": parent_initialized, **_cuda_op_in_child("fork", timeout)}


def fork_after_cuda_init(timeout: float = 60.0) -> dict:
    """(a) A parent creates a CUDA tensor, then forks; the child tries a CUDA op. Fresh interpreter.

    Expected outcome: ``child_outcome`` starts with ``RuntimeError: Cannot re-initialize CUDA in
    forked subprocess``. Not run as a doctest: it needs a CUDA device.

    >>> fork_after_cuda_init()["child_outcome"].startswith(  # doctest: +SKIP
    ...     "RuntimeError: Cannot re-initialize CUDA in forked subprocess"
    ... )
    True
    """
    return _run_fresh("_body_fork_after_init", timeout + 120, timeout=timeout)


# What the parent calls before forking, in the poison table.
POISON_CALLS = ("nothing", "is_available()", "device_count()", "a CUDA tensor")


def _parent_call(call: str):
    if call == "nothing":
        return None
    if call == "is_available()":
        return torch.cuda.is_available()
    if call == "device_count()":
        return torch.cuda.device_count()
    if call == "a CUDA tensor":
        return str(torch.zeros(1, device="cuda").device)
    raise ValueError(f"call must be one of {POISON_CALLS}, got {call!r}")


def _body_poison_case(call: str, timeout: float) -> dict:
    returned = _parent_call(call)
    return {
        "call": call,
        "nvml_check": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == "1",
        "returned": returned,
        "parent_initialized": torch.cuda.is_initialized(),
        **_cuda_op_in_child("fork", timeout),
    }


def poison_table(timeout: float = 60.0, calls: tuple[str, ...] = POISON_CALLS) -> list[dict]:
    """(b) Which parent calls poison fork: each call, with and without PYTORCH_NVML_BASED_CUDA_CHECK=1.

    Each case runs in its own fresh interpreter: it makes the call, records
    ``torch.cuda.is_initialized()``, then forks a child that reports ``_cuda_isInBadFork()`` and the
    outcome of a CUDA op. Measured, not assumed: the answer depends on the torch version and on
    whether NVML works on the machine. Not run as a doctest: it needs a CUDA device.

    >>> rows = poison_table(calls=("a CUDA tensor",))  # doctest: +SKIP
    >>> [(row["nvml_check"], row["parent_initialized"]) for row in rows]  # doctest: +SKIP
    [(False, True), (True, True)]
    """
    rows = []
    for nvml in (False, True):
        env = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1" if nvml else None}
        for call in calls:
            row = _run_fresh("_body_poison_case", timeout + 120, env=env, call=call, timeout=timeout)
            row.setdefault("call", call)
            row.setdefault("nvml_check", nvml)
            rows.append(row)
    return rows


def _body_fixes(timeout: float) -> dict:
    torch.zeros(1, device="cuda")  # the parent has initialised CUDA, as before
    rows = {}
    for method in ("spawn", "forkserver"):
        if method in mp.get_all_start_methods():
            rows[method] = _cuda_op_in_child(method, timeout)
    return {"parent_initialized": torch.cuda.is_initialized(), "children": rows}


def cuda_fixes(timeout: float = 120.0) -> list[dict]:
    """(c) The fixes: spawn and forkserver children of a CUDA-initialised parent, and a fork child of
    a parent that kept CUDA out (it never touched CUDA). Each row: fix, parent state, child outcome.

    Not run as a doctest: it needs a CUDA device.

    >>> all(row["child_outcome"].startswith("ok") for row in cuda_fixes())  # doctest: +SKIP
    True
    """
    after_init = _run_fresh("_body_fixes", timeout * 2 + 120, timeout=timeout)
    rows = [
        {"fix": f"{method} (the parent initialised CUDA)", "parent_initialized": True, **child}
        for method, child in after_init.get("children", {}).items()
    ]
    if "error" in after_init:
        rows.append({"fix": "spawn/forkserver", "child_outcome": after_init["error"], **after_init})
    clean = _run_fresh("_body_poison_case", timeout + 120, call="nothing", timeout=timeout)
    rows.append({"fix": "fork, CUDA kept out of the parent", **clean})
    return rows


def _ipc_consumer(inbox, outbox, timeout: float) -> None:
    """Spawn child of :func:`cuda_ipc_queue`: receive a CUDA tensor, write into it, release it."""
    tensor = inbox.get(timeout=timeout)
    info = {"consumer_pid": os.getpid(), "device": str(tensor.device), "received": tensor.tolist()}
    tensor.add_(1)  # in place, on the producer's memory
    torch.cuda.synchronize()
    del tensor  # consumers release promptly (docs: Multiprocessing best practices, CUDA)
    outbox.put(info)


def _body_ipc(timeout: float) -> dict:
    import torch.multiprocessing as tmp

    from helpers.processes import running

    ctx = tmp.get_context("spawn")
    tensor = torch.zeros(4, device="cuda")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    consumer = ctx.Process(target=_ipc_consumer, args=(inbox, outbox, timeout))
    with running([consumer], timeout=timeout + 30):
        inbox.put(tensor)  # the producer (this process) keeps `tensor` alive until the consumer is done
        info = outbox.get(timeout=timeout)
        torch.cuda.synchronize()
        seen = tensor.tolist()
    return {"producer_pid": os.getpid(), "sent": [0.0] * 4, "consumer": info, "producer_sees": seen}


def cuda_ipc_queue(timeout: float = 120.0) -> dict:
    """(d) A CUDA tensor through a torch Queue to a spawn child, which adds 1 in place.

    CUDA IPC shares the memory, no copy: ``producer_sees`` is all ones after the consumer's write.
    Not run as a doctest: it needs a CUDA device.

    >>> cuda_ipc_queue()["producer_sees"]  # doctest: +SKIP
    [1.0, 1.0, 1.0, 1.0]
    """
    return _run_fresh("_body_ipc", timeout + 120, timeout=timeout)


def _short_lived_producer(outbox) -> None:
    """Spawn child of :func:`broken_keep_alive`: put a CUDA tensor on the queue and exit at once."""
    outbox.put(torch.full((4,), 7.0, device="cuda"))


def _body_broken(timeout: float) -> dict:
    import torch.multiprocessing as tmp

    ctx = tmp.get_context("spawn")
    outbox = ctx.Queue()
    producer = ctx.Process(target=_short_lived_producer, args=(outbox,))
    producer.start()
    producer.join(timeout)  # the rule broken: the producer is gone before the consumer reads
    (exitcode,) = reap([producer], timeout=0)
    result = {"producer_exitcode": exitcode}
    try:
        tensor = outbox.get(timeout=timeout)
        result["consumer_outcome"] = f"received {tensor.tolist()}"
    except Exception as error:  # noqa: BLE001 (whatever it is, it is the lesson)
        result["consumer_outcome"] = _error_line(error)
    return result


def broken_keep_alive(timeout: float = 60.0) -> dict:
    """(d) The keep-alive rule broken: a spawn producer puts a CUDA tensor and exits before the
    consumer (a fresh interpreter) gets it. What happens is reported, not assumed; ``stderr`` holds
    torch's warnings from both processes. Not run as a doctest: it needs a CUDA device.

    >>> sorted(broken_keep_alive())  # doctest: +SKIP
    ['consumer_outcome', 'producer_exitcode', 'stderr']
    """
    return _run_fresh("_body_broken", timeout * 2 + 120, timeout=timeout)


def _device_worker(rank: int, ndevices: int) -> dict:
    """Spawn worker: pick a GPU with ``torch.cuda.set_device``; report what the process sees."""
    torch.cuda.set_device(rank % ndevices)
    x = torch.ones(1, device="cuda")  # "cuda" means the current device
    return {"rank": rank, "current_device": torch.cuda.current_device(), "tensor_on": str(x.device)}


def _visible_worker(rank: int, ndevices: int) -> dict:
    """Spawn worker: restrict itself to one GPU with CUDA_VISIBLE_DEVICES, *before* any CUDA call."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank % ndevices)
    return {
        "rank": rank,
        "CUDA_VISIBLE_DEVICES": os.environ["CUDA_VISIBLE_DEVICES"],
        "device_count": torch.cuda.device_count(),
        "cuda:0 is": torch.cuda.get_device_name(0),
    }


def _body_devices(timeout: float) -> dict:
    from helpers.launch import launch

    ndevices = torch.cuda.device_count()  # NVML-based where possible; this parent only spawns
    nprocs = max(2, ndevices)
    return {
        "ndevices": ndevices,
        "set_device": launch(_device_worker, (ndevices,), nprocs, method="spawn", timeout=timeout),
        "visible_devices": launch(_visible_worker, (ndevices,), nprocs, method="spawn", timeout=timeout),
    }


def per_process_devices(timeout: float = 120.0) -> dict:
    """(d) One GPU per process: ``torch.cuda.set_device(rank % n)`` and ``CUDA_VISIBLE_DEVICES``,
    each in ``max(2, n)`` spawn workers (with one GPU, two workers share it).

    Not run as a doctest: it needs a CUDA device.

    >>> result = per_process_devices()  # doctest: +SKIP
    >>> len(result["set_device"]) == max(2, result["ndevices"])  # doctest: +SKIP
    True
    """
    return _run_fresh("_body_devices", timeout * 2 + 120, timeout=timeout)


def run_gpu_demos(timeout: float = 120.0, progress: TextIO | None = None) -> dict:
    """Every GPU demo, in order: a dict of their results (needs CUDA; see :func:`cuda_present`).

    Not run as a doctest: it needs a CUDA device and takes minutes.

    >>> list(run_gpu_demos())[:2]  # doctest: +SKIP
    ['fork_after_cuda_init', 'poison_table']
    """
    demos = {
        "fork_after_cuda_init": fork_after_cuda_init,
        "poison_table": poison_table,
        "cuda_fixes": cuda_fixes,
        "cuda_ipc_queue": cuda_ipc_queue,
        "broken_keep_alive": broken_keep_alive,
        "per_process_devices": per_process_devices,
    }
    results = {}
    for name, demo in demos.items():
        if progress is not None:
            print(f"running {name} ...", file=progress, flush=True)
        results[name] = demo(timeout=timeout)
    return results


def check_gpu_results(results: dict) -> None:
    """Assert the robust claims of the GPU demos (raises AssertionError with the evidence).

    Only what the docs promise is asserted: fork after init fails, a CUDA tensor in the parent
    poisons fork, spawn and forkserver work, a parent that never touched CUDA forks fine, and CUDA
    IPC shares memory. Which *queries* poison fork is measured and printed, never asserted.
    The first example runs anywhere; the second is not run as a doctest: it needs a CUDA device.

    >>> check_gpu_results({"fork_after_cuda_init": {"parent_initialized": False}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: {'parent_initialized': False}...
    >>> check_gpu_results(run_gpu_demos())  # doctest: +SKIP
    """
    first = results["fork_after_cuda_init"]
    assert first.get("parent_initialized") is True, first
    assert CUDA_REINIT_ERROR in first.get("child_outcome", ""), first
    for row in results["poison_table"]:
        if row["call"] == "a CUDA tensor":
            assert row.get("parent_initialized") is True and CUDA_REINIT_ERROR in row["child_outcome"], row
        if row["call"] == "nothing":
            assert row.get("child_outcome", "").startswith("ok"), row
    for row in results["cuda_fixes"]:
        assert row.get("child_outcome", "").startswith("ok"), row
    ipc = results["cuda_ipc_queue"]
    assert ipc.get("producer_sees") == [1.0] * 4, ipc
    assert ipc["consumer"]["device"].startswith("cuda"), ipc


# --------------------------------------------------------------------------------------------------
# The recorded transcript
# --------------------------------------------------------------------------------------------------

_HEADER_KEYS = ("device", "driver", "torch", "cuda_runtime", "python", "date")


def _yes_no(value) -> str:
    return {True: "yes", False: "no", None: "n/a"}.get(value, str(value))


def format_transcript(info: dict, results: dict) -> str:
    """The transcript text: a header (device, driver, versions, date), then each demo's outcome.

    >>> text = format_transcript({"device": "GPU X", "date": "2026-01-01"}, {})
    >>> read_transcript_text(text)[0]["device"]
    'GPU X'
    """
    lines = ["# helpers.cuda: GPU demos of notebook 04, recorded on a real GPU", ""]
    lines += [f"{key}: {info.get(key, 'unknown')}" for key in _HEADER_KEYS]
    if len(info.get("devices", [])) > 1:
        lines.append(f"all devices: {', '.join(info['devices'])}")
    lines += ["", f"command: {TRANSCRIPT_COMMAND}", ""]
    if "fork_after_cuda_init" in results:
        r = results["fork_after_cuda_init"]
        lines += [
            "## (a) The parent creates a CUDA tensor, then forks; the child tries a CUDA op",
            f"parent torch.cuda.is_initialized(): {_yes_no(r.get('parent_initialized'))}",
            f"child _cuda_isInBadFork(): {_yes_no(r.get('child_bad_fork'))}",
            f"child outcome: {r.get('child_outcome') or _failure(r)}",
            "",
        ]
    if "poison_table" in results:
        lines += [
            "## (b) Which parent calls poison fork (each case in a fresh interpreter)",
            f"{'parent calls':<16} {'NVML check':<11} {'returned':<10} {'parent init':<12} "
            f"{'child bad fork':<15} child's CUDA op",
        ]
        for r in results["poison_table"]:
            lines.append(
                f"{r['call']:<16} {_yes_no(r['nvml_check']):<11} {str(r.get('returned', '-')):<10} "
                f"{_yes_no(r.get('parent_initialized')):<12} {_yes_no(r.get('child_bad_fork')):<15} "
                f"{r.get('child_outcome') or _failure(r)}"
            )
        lines.append("(NVML check: PYTORCH_NVML_BASED_CUDA_CHECK=1 in the parent's environment)")
        lines.append("")
    if "cuda_fixes" in results:
        lines.append("## (c) The fixes")
        for r in results["cuda_fixes"]:
            outcome = r.get("child_outcome") or _failure(r)
            lines.append(f"{r['fix']:<42} child: {outcome} ({r.get('child_seconds', '?')} s)")
        lines.append("")
    if "cuda_ipc_queue" in results:
        r = results["cuda_ipc_queue"]
        lines.append("## (d) A CUDA tensor through a torch Queue to a spawn child (CUDA IPC)")
        if "error" in r:
            lines += [f"failed: {_failure(r)}", ""]
        else:
            consumer = r["consumer"]
            shared = r["producer_sees"] == [x + 1 for x in r["sent"]]
            verdict = "the consumer's write: same memory, no copy" if shared else "NOT the consumer's write"
            lines += [
                f"producer (pid {r['producer_pid']}) sent {r['sent']} on cuda",
                f"consumer (pid {consumer['consumer_pid']}) received {consumer['received']} on "
                f"{consumer['device']}, added 1 in place, released it",
                f"producer now sees {r['producer_sees']}: {verdict}",
                "",
            ]
    if "broken_keep_alive" in results:
        r = results["broken_keep_alive"]
        torch_lines = [line for line in r.get("stderr", "").splitlines() if line.strip()][-4:]
        lines += [
            "## (d) The keep-alive rule broken: the producer exits before the consumer gets the tensor",
            f"producer exit code: {r.get('producer_exitcode')}",
            f"consumer: {r.get('consumer_outcome') or _failure(r)}",
            *(f"stderr: {line[:200]}" for line in torch_lines),
            "",
        ]
    if "per_process_devices" in results:
        r = results["per_process_devices"]
        count = r["ndevices"] if "ndevices" in r else _failure(r)
        lines.append(f"## (d) One device per process ({count} GPU(s) here)")
        lines += [f"set_device: {row}" for row in r.get("set_device", [])]
        lines += [f"CUDA_VISIBLE_DEVICES: {row}" for row in r.get("visible_devices", [])]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def read_transcript_text(text: str) -> tuple[dict, str]:
    """Split a transcript into its header (``key: value`` lines before the first ``##``) and text.

    >>> read_transcript_text("device: GPU X\\ndate: today\\n## (a) a demo\\nchild outcome: ok\\n")[0]
    {'device': 'GPU X', 'date': 'today'}
    """
    header = {}
    for line in text.splitlines():
        if line.startswith("## "):
            break
        match = re.match(r"([a-z_ ]+): (.*)$", line)
        if match:
            header[match.group(1)] = match.group(2)
    return header, text


def read_transcript(path: Path | str | None = None) -> tuple[dict, str] | None:
    """The committed transcript (``path``, default :data:`TRANSCRIPT`) as ``(header, text)``, or None
    when it has not been recorded yet.

    >>> read_transcript("/nonexistent/transcript.txt") is None
    True
    """
    path = Path(path) if path is not None else TRANSCRIPT
    if not path.is_file():
        return None
    return read_transcript_text(path.read_text())


def recorded_banner(header: dict) -> str:
    """The label shown above a recorded transcript: where and when it was recorded.

    >>> print(recorded_banner({"device": "GPU X", "driver": "1", "torch": "2", "date": "d"}))
    RECORDED on GPU X (driver 1, torch 2, d), NOT run now: this machine has no CUDA device.
    """
    return (
        f"RECORDED on {header.get('device', '?')} (driver {header.get('driver', '?')}, torch "
        f"{header.get('torch', '?')}, {header.get('date', '?')}), "
        "NOT run now: this machine has no CUDA device."
    )


def write_transcript(out: TextIO, timeout: float = 120.0, progress: TextIO | None = None) -> dict | None:
    """Run every GPU demo and write the transcript to ``out``; return the results.

    Without CUDA, write nothing and return None. Not run as a doctest: on a GPU it runs every demo
    (minutes).

    >>> import io
    >>> out = io.StringIO()
    >>> results = write_transcript(out)  # doctest: +SKIP
    >>> out.getvalue().startswith("# helpers.cuda: GPU demos")  # doctest: +SKIP
    True
    """
    if not cuda_present():
        return None
    info = gpu_info()
    if "error" in info:
        raise RuntimeError(f"could not read the GPU's details: {info}")
    results = run_gpu_demos(timeout=timeout, progress=progress)
    out.write(format_transcript(info, results))
    out.flush()
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.cuda``: run the GPU demos and print (or save) the transcript.

    Not run as a doctest: a CLI entry point that needs a CUDA device and takes minutes.

    >>> main(["--output", "notebooks/transcripts/04_fork_and_cuda.txt", "--check"])  # doctest: +SKIP
    0
    """
    parser = argparse.ArgumentParser(
        prog="python -m helpers.cuda",
        description="Run notebook 04's GPU demos (fork after CUDA init, which calls poison fork, the "
        "fixes, CUDA tensors through a queue, one device per process), each in a fresh interpreter "
        "with a timeout, and write the transcript that the notebook shows where CUDA is absent.",
    )
    parser.add_argument("--output", default="-", help="file to write the transcript to (default: stdout)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per child (default 120)")
    parser.add_argument("--check", action="store_true", help="also assert the robust claims (exit 1 if not)")
    args = parser.parse_args(argv)
    if not cuda_present():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        print(f"No CUDA device found (torch {torch.__version__}, {build}): nothing to record.")
        return 0
    if args.output == "-":
        results = write_transcript(sys.stdout, timeout=args.timeout, progress=sys.stderr)
    else:
        buffer = io.StringIO()  # the file is written only once every demo has run
        results = write_transcript(buffer, timeout=args.timeout, progress=sys.stderr)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(buffer.getvalue())
        print(buffer.getvalue(), end="")
        print(f"transcript written to {args.output}", file=sys.stderr)
    if args.check and results is not None:
        try:
            check_gpu_results(results)
        except AssertionError as error:
            print(f"CHECK FAILED: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
