"""A running process read through /proc: the stuck-job inspector (every process of a job's tree, what its
threads wait on, its Python stacks) and the doctor's per-process checks (threads, CUDA, children, kernel)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from helpers.doctor.findings import DoctorError, Finding, finding
from helpers.environment import default_start_method, kernel_subshells, off_main_thread
from helpers.processes import live_children
from helpers.stack_dump import STACK_DUMP_NAME

# ProcessReport, inspect and format_inspection are public through helpers.doctor, which re-exports them;
# helpers.doctor.check runs the per-process checks.
__all__ = ["process_checks_for"]

# --- inspect(): where is a stuck job stuck? ----------------------------------------------------------

# x86-64 syscall numbers of the waits a stuck worker is usually in (others are shown as numbers).
_SYSCALLS_X86_64 = {
    "0": "read", "1": "write", "7": "poll", "23": "select", "35": "nanosleep", "43": "accept",
    "45": "recvfrom", "47": "recvmsg", "61": "wait4", "202": "futex", "230": "clock_nanosleep",
    "232": "epoll_wait", "270": "pselect6", "271": "ppoll", "281": "epoll_pwait", "288": "accept4",
}  # fmt: skip


def _mappings(pid: int) -> dict[tuple[int, int], str]:
    """Address ranges of ``pid``'s mapped files (empty where /proc is unreadable)."""
    ranges = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/"):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                ranges[(start, end)] = parts[5]
    return ranges


def _thread_wait(pid: int, tid: str, maps: dict[tuple[int, int], str]) -> tuple[str, str]:
    """(``wchan syscall``, library of the user-space program counter) of one thread, as far as readable."""
    wchan = syscall = ""
    with contextlib.suppress(OSError):
        wchan = Path(f"/proc/{pid}/task/{tid}/wchan").read_text().strip()
    library = "?"
    with contextlib.suppress(OSError, ValueError):
        fields = Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()
        if fields and fields[0] not in ("running", "-1"):
            names = _SYSCALLS_X86_64 if platform.machine() == "x86_64" else {}
            syscall = names.get(fields[0], f"syscall {fields[0]}")
            pc = int(fields[-1], 16)
            library = next((Path(path).name for (lo, hi), path in maps.items() if lo <= pc < hi), "?")
        elif fields and fields[0] == "running":
            syscall = "running"
    what = " ".join(part for part in (syscall, f"[{wchan}]" if wchan and wchan != "0" else "") if part)
    return what or "unknown (no /proc access)", library


@dataclasses.dataclass
class ProcessReport:
    """One process of a stuck job's tree: its state, what its threads wait on, its Python stack.

    ``python -m helpers.doctor --inspect PID`` prints them, through :func:`format_inspection`.
    """

    pid: int
    ppid: int
    name: str
    cmdline: str
    status: str
    waits: dict[str, int]  # "futex [futex_do_wait] in libgomp.so.1" -> number of threads there
    stack: str  # the Python stacks, or why they could not be read
    stack_source: str  # "py-spy", "faulthandler (SIGUSR1)" or "none"


def _safe(call: Callable[[], str]) -> str:
    import psutil

    try:
        return call()
    except psutil.Error:
        return "?"


def _catches_sigusr1(pid: int) -> bool:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGUSR1 - 1) & 1)
    return False


def _faulthandler_stack(pid: int, timeout: float) -> str | None:
    """Ask a process that ran :func:`register_stack_dump` for its stacks; None if it did not."""
    if not hasattr(signal, "SIGUSR1") or not _catches_sigusr1(pid):
        return None  # SIGUSR1 would kill a process that does not catch it
    dump = None
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"/memfd:{STACK_DUMP_NAME} (deleted)":
                    dump = f"/proc/{pid}/fd/{fd}"
    if dump is None:
        return None
    before = os.stat(dump).st_size
    os.kill(pid, signal.SIGUSR1)
    deadline, sizes = time.monotonic() + timeout, [before]
    while time.monotonic() < deadline:
        time.sleep(0.1)
        sizes.append(os.stat(dump).st_size)
        if sizes[-1] > before and sizes[-1] == sizes[-2] == sizes[-3]:  # grew, then still for 0.2 s
            break
    with open(dump, "rb") as stream:
        stream.seek(before)
        return stream.read().decode(errors="replace").strip() or None


def _py_spy_stack(pid: int, timeout: float) -> tuple[str | None, str]:
    """(stacks, "") from ``py-spy dump``, or (None, why it could not)."""
    from helpers.debugging import py_spy_path

    spy = py_spy_path()
    if spy is None:
        return None, "py-spy is not installed (pip install py-spy)"
    try:
        done = subprocess.run(
            [spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None, f"py-spy did not answer within {timeout:.0f} s"
    if done.returncode == 0:
        return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout).strip(), ""
    error = (done.stderr.strip() or done.stdout.strip()).splitlines()
    text = " ".join(error[-2:]) if error else f"exit code {done.returncode}"
    if re.search(r"Permission denied|Operation not permitted|EPERM", text):
        text = (
            f"py-spy may not attach (ptrace not permitted: {text}). Run as root or the same user with "
            "/proc/sys/kernel/yama/ptrace_scope 0; in Docker add --cap-add SYS_PTRACE"
        )
    elif re.search(r"python version|Failed to find python", text, re.IGNORECASE):
        text = f"not a Python process, or one py-spy does not know ({text})"
    return None, text


def _report(process, timeout: float) -> ProcessReport:
    import psutil

    pid = process.pid
    try:
        status, ppid = process.status(), process.ppid()
    except psutil.NoSuchProcess:
        return ProcessReport(pid, 0, "?", "", "gone", {}, "the process exited meanwhile", "none")
    name, cmdline = _safe(process.name), _safe(lambda: " ".join(process.cmdline()))  # "?" for a zombie
    maps = _mappings(pid)
    waits: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            what, library = _thread_wait(pid, tid, maps)
            key = what if library == "?" else f"{what} in {library}"
            waits[key] = waits.get(key, 0) + 1
    if status == psutil.STATUS_ZOMBIE:
        return ProcessReport(
            pid, ppid, name, cmdline, status, waits, "exited; its parent has not reaped it (join)", "none"
        )
    stack, why = _py_spy_stack(pid, timeout)
    source = "py-spy"
    if stack is None:
        stack, source = _faulthandler_stack(pid, timeout), "faulthandler (SIGUSR1)"
        if stack is None:
            stack, source = why + "; it did not register faulthandler on SIGUSR1 either", "none"
    return ProcessReport(pid, ppid, name, cmdline, status, waits, stack, source)


def inspect(pid: int, timeout: float = 10.0) -> list[ProcessReport]:
    """Every process of ``pid``'s tree: state, what each thread waits on, Python stacks; as one report.

    Waits come from ``/proc/PID/task/*/wchan`` and ``syscall`` (the kernel function and the library
    the thread is in, e.g. a futex wait in libgomp for the OpenMP fork hang). Stacks come from
    ``py-spy dump`` or, where it cannot attach, from faulthandler in processes that ran
    :func:`register_stack_dump`; otherwise the report says why there is none. Raises
    :class:`DoctorError` when ``pid`` does not exist. ``python -m helpers.doctor --inspect PID`` runs it
    ([08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand)
    reads a hung child's stacks with faulthandler and py-spy directly).

    >>> import subprocess, sys
    >>> child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    >>> time.sleep(1)
    >>> [r.pid for r in inspect(child.pid)] == [child.pid]
    True
    >>> child.kill(); child.wait()
    -9
    """
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        raise DoctorError(f"no process with pid {pid}") from None
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:  # a DDP job has dozens of processes
        return list(pool.map(lambda process: _report(process, timeout), tree))


def format_inspection(reports: Sequence[ProcessReport]) -> str:
    """:func:`inspect`'s reports as text: one block per process, its waits, then its stacks.
    ``python -m helpers.doctor --inspect PID`` prints it for a hung job.

    >>> print(format_inspection([ProcessReport(7, 1, "python", "python x.py", "sleeping",
    ...                                        {"futex": 1}, "Thread 7 ...", "py-spy")]))
    pid 7 (parent 1) sleeping: python x.py
      1 thread(s): futex
      stacks (py-spy):
        Thread 7 ...
    """
    lines = []
    for r in reports:
        command = " ".join(r.cmdline.split())[:120] or r.name  # one line, even for `python -c` scripts
        lines.append(f"pid {r.pid} (parent {r.ppid}) {r.status}: {command}")
        lines += [f"  {n} thread(s): {what}" for what, n in r.waits.items()]
        lines.append(f"  stacks ({r.stack_source}):")
        lines += [f"    {line}" for line in r.stack.splitlines()]
    return "\n".join(lines)


# --- Per-process checks: this process (inside), or another one by pid (from outside) -------------


def process_checks_for(pid: int | None, per_process: bool) -> dict[str, Callable[[], Finding]]:
    """The per-process checks by name, each ready to run: of process ``pid``, or of this process when
    ``pid`` is None; without ``per_process`` (a fresh command line, nothing to look at) each reports
    ``n/a``. :func:`helpers.doctor.check` runs them.

    >>> process_checks_for(None, per_process=False)["leftover children"]().status
    'n/a'
    """

    def checked_or_n_a(name: str, check: Callable[[int | None], Finding]) -> Callable[[], Finding]:
        return lambda: check(pid) if per_process else _not_here(name)

    return {
        "threads before fork": checked_or_n_a("threads before fork", _check_threads),
        "CUDA initialised": checked_or_n_a("CUDA initialised", _check_cuda),
        "leftover children": checked_or_n_a("leftover children", _check_children),
        "Jupyter kernel": checked_or_n_a("Jupyter kernel", _check_kernel),
        "main thread": checked_or_n_a("main thread", _check_main_thread),
    }


def _not_here(name: str) -> Finding:
    return finding(
        name,
        "n/a",
        "per-process: run check() inside the job's script or kernel, or pass --pid PID",
    )


def _threads_by_library(pid: int, settle: float = 1.0) -> dict[str, int]:
    """For each thread of ``pid``, the library its program counter is in (Linux /proc); counted.

    A running thread shows no program counter, and OpenMP's workers spin for a while after a
    parallel region before they wait (longer on a loaded machine): so the threads are read again,
    0.05 s apart, until none but the caller runs or ``settle`` seconds have passed.
    """
    maps = _mappings(pid)
    caller = str(threading.get_native_id()) if pid == os.getpid() else None
    deadline = time.monotonic() + settle
    while True:
        counts: dict[str, int] = {}
        running = 0
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                what, where = _thread_wait(pid, tid, maps)
                counts[where] = counts.get(where, 0) + 1
                running += what == "running" and tid != caller
        if not running or time.monotonic() > deadline:
            return counts
        time.sleep(0.05)


_OPENMP_LIBRARIES = ("libgomp", "libiomp", "libomp")
# Native thread pools, by a part of their library's file name (wheels rename them: libgomp-a34b3233.so.1).
_THREAD_POOLS = {"libgomp": "GNU OpenMP", "libomp": "LLVM OpenMP", "libiomp": "Intel OpenMP",
                 "openblas": "OpenBLAS", "libmkl": "MKL"}  # fmt: skip


def _thread_pools(maps: dict[tuple[int, int], str]) -> list[str]:
    """The native thread pools a process has loaded, as ``"GNU OpenMP (libgomp)"``, from its mappings.

    >>> _thread_pools({(0, 1): "/x/libgomp-a34b3233.so.1", (1, 2): "/y/libscipy_openblas64_-32a4b2a6.so"})
    ['GNU OpenMP (libgomp)', 'OpenBLAS (libscipy_openblas64_)']
    """
    found = {}
    for path in maps.values():
        name = Path(path).name
        for part, pool in _THREAD_POOLS.items():
            if part in name.lower():
                found.setdefault(pool, re.split(r"-[0-9a-f]{6,}|\.so", name)[0])
    return [f"{pool} ({library})" for pool, library in found.items()]


def _check_threads(pid: int | None) -> Finding:
    target = pid or os.getpid()
    try:
        total = len(os.listdir(f"/proc/{target}/task"))
        Path(f"/proc/{target}/syscall").read_text()
    except OSError as error:
        import psutil

        total = psutil.Process(target).num_threads()
        measured = (
            f"{total} thread(s); cannot read /proc/{target}/task/*/syscall ({error.strerror}: "
            "ptrace not permitted: another user's process, or Yama ptrace_scope >= 1): waits unknown"
        )
        return finding("threads before fork", "n/a", measured)
    libraries = _threads_by_library(target)
    openmp = sum(n for lib, n in libraries.items() if lib.startswith(_OPENMP_LIBRARIES))
    python_threads = threading.active_count() if pid is None else None
    measured = f"{total} thread(s), {openmp} waiting in an OpenMP library"
    if python_threads is not None:
        measured += f", {python_threads} Python thread(s)"
    pools = _thread_pools(_mappings(target))
    measured += "; native thread pools loaded: " + (", ".join(pools) or "none")
    measured += " (waits are seen in GNU OpenMP only: the others wait inside libc)" if pools else ""
    risky = openmp > 0 or (python_threads or 1) > 1
    return finding("threads before fork", "warn" if risky else "ok", measured)


def _cuda_driver_open(pid: int) -> bool | None:
    """Whether ``pid`` holds the CUDA driver's unified-memory device open (None where /proc is unreadable).

    The driver opens ``/dev/nvidia-uvm`` when it initialises (``cuInit``): on a CUDA tensor, and
    already on ``torch.cuda.is_available()``, which makes a later fork child's CUDA fail although
    ``torch.cuda.is_initialized()`` is still False. Importing torch maps libcuda but opens no
    device file, and the NVML-based check (``PYTORCH_NVML_BASED_CUDA_CHECK=1``) opens no UVM device.

    >>> _cuda_driver_open(-1) is None  # no such process: unknown, not "no"
    True
    """
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return None
    targets = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            targets.add(os.readlink(fd))
    return "/dev/nvidia-uvm" in targets


def _check_cuda(pid: int | None) -> Finding:
    import torch

    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None and pid is None:
        return finding("CUDA initialised", "ok", "no: this torch is a CPU build (CUDA cannot be initialised)")
    driver = _cuda_driver_open(os.getpid() if pid is None else pid)
    if pid is None:
        initialised = torch.cuda.is_initialized()
        measured = (
            f"torch.cuda.is_initialized() = {initialised}; CUDA driver initialised (is_available() does "
            f"this) = {bool(driver)}; default start method {default_start_method()}"
        )
        risky = (initialised or driver) and default_start_method() == "fork"
        return finding("CUDA initialised", "warn" if risky else "ok", measured)
    if driver is None:
        return finding("CUDA initialised", "n/a", f"cannot read /proc/{pid}/fd (another user's process?)")
    if driver:
        return finding(
            "CUDA initialised",
            "warn",
            f"pid {pid} holds /dev/nvidia-uvm open: it has initialised the CUDA driver, so its fork "
            "children cannot use CUDA",
        )
    return finding("CUDA initialised", "ok", f"no: pid {pid} has not opened the CUDA driver")


def _check_children(pid: int | None) -> Finding:
    import psutil

    if pid is None:
        children = live_children()
    else:
        children = [
            c for c in psutil.Process(pid).children(recursive=True) if _safe(c.status) != psutil.STATUS_ZOMBIE
        ]
    if not children:
        return finding("leftover children", "ok", "none alive")
    listed = ", ".join(f"pid {c.pid} ({_safe(c.name)})" for c in children[:5])
    return finding("leftover children", "warn", f"{len(children)} alive: {listed}")


def _in_kernel(pid: int | None) -> bool:
    if pid is None:
        shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
        return shell is not None and getattr(shell, "kernel", None) is not None
    import psutil

    return "ipykernel" in " ".join(psutil.Process(pid).cmdline())


def _check_kernel(pid: int | None) -> Finding:
    if not _in_kernel(pid):
        return finding("Jupyter kernel", "ok", "not a Jupyter kernel")
    method = default_start_method() if pid is None else "unknown from outside"
    risky = method != "fork"
    measured = f"a Jupyter kernel, default start method {method}: " + (
        "cell-defined workers run only under fork; spawn/forkserver import them from a module"
        if not risky
        else "a worker defined in a cell fails in the child"
    )
    subshells = kernel_subshells() if pid is None else None
    if subshells or (pid is None and off_main_thread()):
        # JupyterLab 4.4+ with ipykernel 7: widget callbacks run there, off the main thread, where
        # torch installs no signal handlers (the DataLoader's SIGCHLD, torchrun's SIGTERM/SIGINT).
        risky = True
        measured += (
            f"; {len(subshells or [])} kernel subshell(s), this check on thread "
            f"{threading.current_thread().name!r}: widget callbacks run off the main thread, "
            "without torch's main-thread signal handlers"
        )
    return finding("Jupyter kernel", "warn" if risky else "ok", measured)


def _check_main_thread(pid: int | None) -> Finding:
    """Whether check() runs on the main thread, where a launcher it precedes can install signal handlers."""
    if pid is not None:
        return finding(
            "main thread", "n/a", "which thread launches cannot be seen from outside: call check() there"
        )
    thread = threading.current_thread()
    if thread is threading.main_thread():
        return finding("main thread", "ok", f"check() runs on the main thread ({thread.name})")
    measured = (
        f"check() runs on thread {thread.name!r}, not the main thread: a launcher started here installs no "
        "signal handlers"
    )
    return finding("main thread", "warn", measured)
