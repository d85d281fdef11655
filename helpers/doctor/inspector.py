"""The stuck-job inspector: every process of a job's tree, what its threads wait on, its Python stacks."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import platform
import re
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from helpers.doctor.findings import DoctorError
from helpers.stack_dump import STACK_DUMP_NAME

__all__: list[str] = []  # the public names are imported from helpers.doctor, which re-exports them

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
