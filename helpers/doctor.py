"""The doctor: check a machine and a launch target before anything starts, and inspect a stuck job.

The failures people hit most with ``torch.multiprocessing`` are known in advance and can be
measured before a launch: a worker that a spawn/forkserver child cannot import, OpenMP threads
already running when the parent forks, CUDA initialised before fork, ``/dev/shm`` too small
(Docker's 64 MB), an open-file limit too low for the ``file_descriptor`` sharing strategy, an
unresolvable hostname or a busy ``MASTER_PORT``, leftover children and stale shared memory.
:func:`check` measures each and returns :class:`Finding` objects; :func:`inspect` reports every
process of a stuck job's tree with its state, what it waits on and its Python stack.

From a shell (notebooks 00 and 08 use the same functions)::

    python -m helpers.doctor                          # this machine
    python -m helpers.doctor --target mypkg.train:worker --nprocs 4
    python -m helpers.doctor --pid 12345              # per-process checks of a running job
    python -m helpers.doctor --inspect 12345          # where is a stuck job stuck?
    python -m helpers.doctor --json                   # for machines

The doctor imports only the standard library, torch and psutil (torch and psutil inside the
functions that need them), and imports a target only in a fresh interpreter with a deadline:
importing it here would run an unguarded script's top level.

Example::

    >>> from helpers.doctor import check, format_findings
    >>> findings = check(only=["open files"])
    >>> findings[0].name, findings[0].status in ("ok", "warn", "fail")
    ('open files', True)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import errno
import faulthandler
import json
import math
import multiprocessing as mp
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from helpers.environment import (  # the cgroup readers live with the other facts about this machine
    _cgroup_memory,
    _cgroup_quota,
    default_start_method,
)
from helpers.processes import dev_shm_entries, live_children

__all__ = [
    "Finding",
    "DoctorError",
    "CHECKS",
    "check",
    "format_findings",
    "usable_cpus",
    "ProcessReport",
    "inspect",
    "format_inspection",
    "register_stack_dump",
    "main",
]

STATUSES = ("ok", "warn", "fail", "n/a")
TORCHRUN_DEFAULT_PORT = 29500  # torchrun's --master-port default (static rendezvous)
TORCHRUN_RDZV_PORT = 29400  # torchrun's c10d rendezvous port (--rdzv-endpoint host without a port)
DOCKER_DEFAULT_SHM = 64 * 1024**2  # `docker run` without --shm-size (moby/moby#29492)
DEFAULT_SHM_NEED = 512 * 1024**2
DEFAULT_WORKER_MEM = 1024**3  # a rough figure for one torch worker's memory; --mem-need names the real one
STACK_DUMP_NAME = "helpers-stack-dump"  # the memfd that register_stack_dump() writes stacks into


class DoctorError(ValueError):
    """Bad input to the doctor (a malformed or unimportable target, a process that does not exist).
    Not used by a notebook: the README's doctor section (``python -m helpers.doctor``) shows what it prints.

    The message is one line that says what to do; the command line prints it and exits with 2.
    """


@dataclasses.dataclass
class Finding:
    """One check's result: what was measured, whether it is a problem, and what to do about it.

    ``status`` is ``ok``, ``warn`` (works, but a known failure is near), ``fail`` (a launch will
    fail or hang) or ``n/a`` (not measurable from here, e.g. a per-process check run from a fresh
    command line). ``teaches`` names the notebook section; ``prevents`` the upstream issue or doc.

    >>> Finding("open files", "ok", "soft 4096", "...", "...", "02 §5", "pytorch#973").status
    'ok'
    """

    name: str
    status: str
    measured: str
    why: str
    fix: str
    teaches: str
    prevents: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")


# --- What each check is about: why it matters, the fix, where it is taught, what it prevents -------

_ABOUT = {
    "python and torch": (
        "Python changes multiprocessing's defaults (3.14: forkserver on Linux) and its messages; "
        "the series is measured on Python 3.10-3.13 with torch 2.11-2.14.",
        "Use a tested pair, or read the notebooks' version notes for yours.",
        "00 §Your environment",
        "CPython gh-84559 (3.14 default start method); torch release notes",
    ),
    "default start method": (
        "fork, spawn and forkserver differ in what a child inherits and what it must import; code "
        "that silently relies on fork breaks when the default changes.",
        "Name the method explicitly: ctx = mp.get_context('spawn') (never set_start_method in a "
        "notebook or library).",
        "01 §2 Three start methods",
        "CPython gh-84559; Python docs 'Contexts and start methods'",
    ),
    "target importable": (
        "spawn and forkserver children import the function by module and name: a function from "
        "__main__ (a notebook, an interactive session), a lambda or a nested function fails in "
        "the child ('Can't get attribute ...'), often far from its cause.",
        "Move the worker to a module (e.g. mypkg/workers.py), import it, and guard the script "
        "with if __name__ == '__main__':.",
        "01 §3 A worker defined in the notebook fails under spawn",
        "pytorch#87016, pytorch#5301; Python docs 'Programming guidelines'",
    ),
    "threads before fork": (
        "A forked child inherits memory but only the calling thread: state that refers to threads "
        "fork did not copy (GNU OpenMP's pool waits for them at a barrier; a lock another thread held) "
        "never changes in the child, so it can hang (an OpenMP parallel op does).",
        "Start workers with spawn/forkserver, or call torch.set_num_threads(1) first thing in "
        "each fork child (DataLoader workers do).",
        "04 §2 The CPU twin: OpenMP after fork",
        "pytorch#17199; CPython gh-100228 (3.12 fork DeprecationWarning)",
    ),
    "CPU threads": (
        "torch picks its thread count from the cores it sees, not from a container's CPU "
        "quota; N processes x T threads above the usable CPUs oversubscribe and run slower.",
        "In each of N workers: torch.set_num_threads(max(1, usable_cpus // N)); or set OMP_NUM_THREADS.",
        "04 §2 The CPU twin: OpenMP after fork; 05 §2 The Hogwild pattern",
        "PyTorch docs 'CPU in multiprocessing' (PR #103229)",
    ),
    "CUDA initialised": (
        "A fork child of a process that has initialised CUDA cannot use CUDA: 'Cannot "
        "re-initialize CUDA in forked subprocess'. torch.cuda.is_available() already initialises "
        "the driver, although torch.cuda.is_initialized() stays False.",
        "Use spawn or forkserver for CUDA workers; keep CUDA calls, is_available() included, out of "
        "the parent before it forks (and out of imports), or set PYTORCH_NVML_BASED_CUDA_CHECK=1.",
        "04 §4 Fork versus CUDA",
        "PyTorch docs 'Multiprocessing best practices: CUDA in multiprocessing'",
    ),
    "imports initialise CUDA": (
        "An import that initialises CUDA (torch.cuda.is_available() at module level does) poisons "
        "every later fork, and it is invisible in your own code.",
        "Import that module inside the worker, or start workers with spawn/forkserver.",
        "04 §4 Fork versus CUDA",
        "PyTorch docs 'CUDA in multiprocessing'",
    ),
    "shared memory": (
        "Tensors passed between processes (DataLoader batches, queues) live in /dev/shm; when it "
        "is full the DataLoader raises 'unable to allocate shared memory(shm) ... No space left on "
        "device (28)' (torch 2.13 to 2.15; older releases: the worker died with 'Bus error').",
        "docker run --shm-size=2g (or --ipc=host); Kubernetes: an emptyDir with medium: Memory "
        "on /dev/shm; or fewer workers / smaller prefetch.",
        "02 §1 share_memory_() moves the storage; 08 §4 A full /dev/shm",
        "pytorch#5040, pytorch#16979; moby/moby#29492 (Docker's 64 MB default)",
    ),
    "memory": (
        "A job that needs more memory than the machine (or its container's cgroup) has left is "
        "killed by the kernel's OOM killer: a worker's exit code -9 (SIGKILL, 'died with signal 9') "
        "usually means host memory ran out, not a bug in the worker; dmesg says 'Out of memory'.",
        "Fewer workers, smaller batches or prefetch_factor, persistent_workers to avoid copies; "
        "raise the container's limit (docker run --memory, Kubernetes resources.limits.memory).",
        "08 §2 What the parent sees: exit codes",
        "pytorch#13246 (DataLoader memory growth); kernel docs cgroup-v2 memory.max",
    ),
    "open files": (
        "Under the file_descriptor sharing strategy every shared tensor in flight holds an open "
        "file; at the limit receiving one fails with 'received 0 items of ancdata' or 'Too many "
        "open files'.",
        "Raise the soft limit (ulimit -n <hard>, or resource.setrlimit in the launcher) or "
        "torch.multiprocessing.set_sharing_strategy('file_system').",
        "02 §5 Too many open files",
        "pytorch#973, pytorch#11201; PR #34768 (the ancdata message)",
    ),
    "hostname": (
        "torchrun and init_process_group connect to MASTER_ADDR, by default this host's "
        "fully-qualified name; if it does not resolve, the rendezvous times out.",
        "Set MASTER_ADDR=127.0.0.1 on one machine (torchrun --local-addr 127.0.0.1), or fix "
        "/etc/hosts / DNS for the name shown.",
        "06 §Appendix: where the rendezvous listens",
        "pytorch#150532",
    ),
    "master port": (
        "Rank 0's TCPStore listens on MASTER_PORT on all interfaces (IPv6 and IPv4); a port that "
        "something else holds on any address fails the launch with 'Address already in use' "
        "(errno 98). 29500 is the default of torchrun's static rendezvous (several nodes); its c10d "
        "rendezvous listens on 29400; a single-node torchrun picks a free port itself.",
        "Pick a free port (bind to port 0 and read it back) or stop what holds it.",
        "06 §Appendix: where the rendezvous listens",
        "pytorch#85604",
    ),
    "leftover children": (
        "Children still alive from an earlier run (a stopped cell, a crashed launcher) hold "
        "memory, GPUs, ports and shared memory.",
        "Join with a timeout and terminate what is left (helpers.processes.reap / kill_tree); "
        "restart the kernel if nothing else works.",
        "08 §3 Leave nothing behind: reap in finally, and where signals go",
        "pytorch#1085, pytorch#8805",
    ),
    "orphaned workers": (
        "A plain multiprocessing child outlives a parent that was killed (only torch.mp.spawn "
        "children get PR_SET_PDEATHSIG); orphans keep their memory, GPU and shared memory.",
        "Check the pids shown (ps -o pid,ppid,pgid,args -p PID), then kill them; give children a "
        "parent-death signal or a deadline.",
        "08 §3 Leave nothing behind: reap in finally, and where signals go",
        "pytorch#14394, pytorch#1085",
    ),
    "stale shared memory": (
        "Under the file_system strategy torch_shm_manager unlinks a group's torch_* segments about "
        "2 s after its last client exits, crashes included. A segment whose creator is gone and "
        "that no process maps stays (using RAM) only while another process still holds the manager, "
        "or when the manager itself was killed.",
        "Delete the /dev/shm/torch_<pid>_* files listed: their creator is dead and nothing maps them.",
        "02 §5 Sharing strategies",
        "PyTorch docs 'Multiprocessing best practices: file_system'",
    ),
    "Jupyter kernel": (
        "In a notebook, functions defined in cells live in __main__, which spawn/forkserver "
        "children cannot import; a worker's traceback may land in the terminal, not the cell.",
        "Put workers in a module and import them (helpers/ does this); run a script for long jobs.",
        "01 §3 A worker defined in the notebook fails under spawn; 07 §6 What a spawn worker receives",
        "pytorch#5301, pytorch#51344; Python docs 'multiprocessing: interactive interpreter'",
    ),
    "stack dumps": (
        "When a job hangs, its Python stacks say where; py-spy reads them from outside with ptrace, "
        "which Yama (ptrace_scope 1-3) and containers without CAP_SYS_PTRACE refuse.",
        "pip install py-spy; docker run --cap-add SYS_PTRACE; or run workers through "
        "helpers.launch.launch (faulthandler on SIGUSR1 needs no ptrace).",
        "08 §1 Where is it stuck? A stack dump on demand",
        "py-spy README 'How do I run py-spy in Docker?', py-spy PR #459; kernel docs LSM/Yama (ptrace_scope)",
    ),
}

CHECKS = tuple(_ABOUT)  # the names :func:`check` can run, in the order it reports them


def _finding(name: str, status: str, measured: str) -> Finding:
    return Finding(name, status, measured, *_ABOUT[name])


def _not_here(name: str) -> Finding:
    return _finding(
        name,
        "n/a",
        "per-process: run check() inside the job's script or kernel, or pass --pid PID",
    )


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# --- Machine checks -------------------------------------------------------------------------------


def _check_versions(python: str | None = None, torch_version: str | None = None) -> Finding:
    import torch

    python = python or platform.python_version()
    torch_version = torch_version or torch.__version__
    py = tuple(int(p) for p in re.findall(r"\d+", python)[:2])
    th = tuple(int(p) for p in re.findall(r"\d+", torch_version)[:2])
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build"
    measured = f"Python {python}, torch {torch_version} ({build})"
    if py >= (3, 14) and sys.platform.startswith("linux"):
        return _finding("python and torch", "warn", measured + "; the Linux default is now forkserver")
    tested = (3, 10) <= py <= (3, 13) and (2, 11) <= th <= (2, 14)
    return _finding(
        "python and torch", "ok" if tested else "warn", measured + ("" if tested else ", untested")
    )


def _check_start_method() -> Finding:
    env_var = "MP_DEFAULT_START_METHOD"  # the test suite's switch (tests/portability.py)
    platform_default = mp.get_all_start_methods()[0]
    effective = default_start_method()
    measured = f"{effective} (platform default {platform_default}; Python 3.14+ on Linux: forkserver)"
    if effective != platform_default:
        forced_by_env = os.environ.get(env_var, "").strip() == effective
        why = f"{env_var}={effective} (tests/portability.py)" if forced_by_env else "set_start_method()"
        return _finding("default start method", "warn", f"{effective}, forced by {why}; {measured}")
    return _finding("default start method", "ok", measured)


def usable_cpus() -> int:
    """CPUs this process may really use: its affinity mask, capped by a cgroup CPU quota.
    Used by the doctor's CPU-threads check (notebook 00 section 5) and by
    ``helpers.environment.environment_report``, whose ``usable_cpus`` line the set-up of notebooks 01 and 04
    prints.

    ``os.cpu_count()`` counts the machine's CPUs; a container limited to 2 CPUs on a 64-core
    host still reports 64 there (and torch picks its threads from the cores it sees).

    >>> 1 <= usable_cpus() <= os.cpu_count()
    True
    """
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(count, math.ceil(quota))) if quota else count


def _check_cpu_threads(processes: int, outside: bool = False) -> Finding:
    """torch's thread count here (from outside a process: what a new one gets) against usable CPUs."""
    import torch

    threads = torch.get_num_threads()
    usable = usable_cpus()
    omp = os.environ.get("OMP_NUM_THREADS")
    quota = _cgroup_quota()
    default = " (a new process's default)" if outside else ""
    measured = (
        f"{processes} process(es) x {threads} torch thread(s){default}"
        f" = {processes * threads} on {usable} usable "
        f"CPU(s) (cpu_count {os.cpu_count()}, quota {quota if quota else 'none'}); "
        f"OMP_NUM_THREADS={omp or 'unset'}"
    )
    over = processes * threads > usable or (omp is not None and omp.isdigit() and int(omp) > usable)
    return _finding("CPU threads", "warn" if over else "ok", measured)


def _container() -> str | None:
    """What says this is a container (Docker, Podman, Kubernetes, LXC), or None."""
    if Path("/.dockerenv").exists():
        return "docker (/.dockerenv)"
    if Path("/run/.containerenv").exists():
        return "podman (/run/.containerenv)"
    if os.environ.get("container"):
        return f"container={os.environ['container']}"
    with contextlib.suppress(OSError):
        text = Path("/proc/1/cgroup").read_text()
        for marker in ("kubepods", "docker", "containerd", "lxc"):
            if marker in text:
                return f"{marker} (/proc/1/cgroup)"
    return None


def _check_shared_memory(path: str, need: int) -> Finding:
    try:
        stats = os.statvfs(path)
    except OSError as error:
        return _finding("shared memory", "fail", f"{path}: cannot measure ({error.strerror})")
    total, free = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
    container = _container()
    measured = (
        f"{path}: {_size(free)} free of {_size(total)}, need {_size(need)}; container: {container or 'no'}"
    )
    if free < need:
        return _finding("shared memory", "fail", measured)
    if total <= DOCKER_DEFAULT_SHM:
        return _finding("shared memory", "warn", measured + " (Docker's 64 MB default)")
    return _finding("shared memory", "ok", measured)


def _check_memory(need: int | None, processes: int) -> Finding:
    """The job's memory need against what is available here, the cgroup's room and swap."""
    import psutil

    memory, swap, cgroup = psutil.virtual_memory(), psutil.swap_memory(), _cgroup_memory()
    figure = f" ({processes} x {_size(DEFAULT_WORKER_MEM)} per worker, a rough figure: pass --mem-need)"
    need, source = (need, "") if need is not None else (processes * DEFAULT_WORKER_MEM, figure)
    room = memory.available if cgroup is None else min(memory.available, cgroup[0] - cgroup[1])
    limit = f"{_size(cgroup[1])} used of {_size(cgroup[0])}" if cgroup else "no limit"
    measured = (
        f"need {_size(need)}{source}; available {_size(memory.available)} of {_size(memory.total)}; "
        f"cgroup: {limit}; swap {_size(swap.free)} free of {_size(swap.total)}"
    )
    status = "ok" if need <= room else "warn" if need <= room + swap.free else "fail"
    return _finding("memory", status, measured + ("" if status == "ok" else ": the OOM killer is near"))


def _open_file_status(soft: int, strategy: str) -> str:
    """fail below 256 open files, warn below 4096, under file_descriptor; file_system needs no fds."""
    import resource

    if strategy == "file_system" or soft == resource.RLIM_INFINITY:
        return "ok"
    return "fail" if soft < 256 else "warn" if soft < 4096 else "ok"


def _check_open_files(pid: int | None = None) -> Finding:
    import resource

    import torch.multiprocessing as tmp

    if pid is None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        fd_dir = "/proc/self/fd"
    else:
        import psutil

        soft, hard = psutil.Process(pid).rlimit(psutil.RLIMIT_NOFILE)
        fd_dir = f"/proc/{pid}/fd"
    strategy = tmp.get_sharing_strategy() if pid is None else "file_descriptor (torch's Linux default)"
    try:
        in_use = str(len(os.listdir(fd_dir)))
    except OSError:
        in_use = "?"
    unlimited = resource.RLIM_INFINITY
    show = lambda n: "unlimited" if n == unlimited else str(n)  # noqa: E731
    measured = f"soft limit {show(soft)} (hard {show(hard)}), {in_use} open now; sharing strategy {strategy}"
    return _finding("open files", _open_file_status(soft, strategy.split()[0]), measured)


def _resolves(name: str, timeout: float) -> tuple[bool, str]:
    """Whether ``name`` resolves within ``timeout`` s (getaddrinfo has no timeout of its own)."""
    answer: list[tuple[bool, str]] = []

    def resolve() -> None:
        try:
            infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
            answer.append((True, infos[0][4][0]))
        except OSError as error:
            answer.append((False, str(error)))

    worker = threading.Thread(target=resolve, daemon=True)
    worker.start()
    worker.join(timeout)
    return answer[0] if answer else (False, f"no answer within {timeout:.0f} s")


def _check_hostname(master_addr: str | None, timeout: float) -> Finding:
    fqdn = socket.getfqdn()
    ok, address = _resolves(fqdn, timeout)
    measured = f"getfqdn() = {fqdn} -> {address}"
    status = "ok" if ok else "warn"
    master_addr = master_addr if master_addr is not None else os.environ.get("MASTER_ADDR")
    if master_addr:
        ok_master, master = _resolves(master_addr, timeout)
        measured += f"; MASTER_ADDR = {master_addr} -> {master}"
        if not ok_master:
            status = "fail"
    return _finding("hostname", status, measured)


def _port_holder(port: int) -> str:
    """Who holds ``port``: ``pid NAME`` of a listener where psutil may see it, else what is there."""
    import psutil

    with contextlib.suppress(psutil.Error, OSError):
        conns = [c for c in psutil.net_connections(kind="inet") if c.laddr and c.laddr.port == port]
        for conn in sorted(conns, key=lambda c: (c.status != psutil.CONN_LISTEN, not c.pid)):
            if conn.status == psutil.CONN_LISTEN and conn.pid:
                return f"pid {conn.pid} ({psutil.Process(conn.pid).name()}) on {conn.laddr.ip}"
            if conn.status != psutil.CONN_LISTEN:
                return f"a socket bound without listening ({conn.status}, no process)"
    return "a process this user cannot see"


def _port_busy(port: int) -> str | None:
    """Why a TCPStore could not listen on ``port``, or None: bound the way torch binds.

    TCPStore's server binds ``[::]:port``, IPv6 and IPv4 at once, with ``SO_REUSEADDR`` (libuv),
    and falls back to ``0.0.0.0:port`` without IPv6: so a listener on any address of this host
    blocks it, and a port left in TIME_WAIT by a closed server does not.

    >>> _port_busy(0) is None
    True
    """
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                probe.bind((address, port))
                probe.listen(1)  # a socket bound with SO_REUSEADDR but not listening fails here
                return None
        except OSError as error:
            if error.errno == errno.EADDRINUSE or family == socket.AF_INET:  # else: no IPv6 here
                return f"{error.strerror}, held by {_port_holder(port)}"
    return None


def _check_master_port(master_port: int | None) -> Finding:
    explicit = master_port is not None or bool(os.environ.get("MASTER_PORT"))
    if master_port is None:
        master_port = int(os.environ.get("MASTER_PORT") or TORCHRUN_DEFAULT_PORT)
    source = "" if explicit else " (torchrun's static-rendezvous default)"
    ports = [(master_port, source), (TORCHRUN_RDZV_PORT, " (torchrun's c10d rendezvous default)")]
    parts, status = [], "ok"
    for number, (port, why) in enumerate(ports):
        busy = _port_busy(port)
        parts.append(f"*:{port}{why} " + (f"busy: {busy}" if busy else "is free"))
        if busy:
            status = "fail" if number == 0 and explicit else "warn" if status == "ok" else status
    return _finding("master port", status, "; ".join(parts) + " (bound as TCPStore binds: IPv6 and IPv4)")


def _mine(proc) -> bool:
    me = os.getuid() if hasattr(os, "getuid") else None
    return me is None or not proc.info["uids"] or proc.info["uids"].real == me


def _mapped_paths(paths: set[str]) -> set[str]:
    """Those of ``paths`` that a process of this user maps or holds open (/proc/*/maps and fd)."""
    import psutil

    found: set[str] = set()
    for proc in psutil.process_iter(["uids"]):
        if not _mine(proc) or found == paths:
            continue
        with contextlib.suppress(OSError):
            maps = Path(f"/proc/{proc.pid}/maps").read_text()
            found |= {path for path in paths if path in maps}
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{proc.pid}/fd"):
                with contextlib.suppress(OSError):
                    found |= {os.readlink(f"/proc/{proc.pid}/fd/{fd}").removesuffix(" (deleted)")} & paths
    return found


def _check_stale_shared_memory() -> Finding:
    import psutil

    gone = set()
    for name in sorted(dev_shm_entries()):
        match = re.match(r"torch_(\d+)_", name)
        if match and not psutil.pid_exists(int(match.group(1))):
            gone.add(f"/dev/shm/{name}")
    stale = sorted(Path(path).name for path in gone - _mapped_paths(gone))
    used = len(gone) - len(stale)
    in_use = f" ({used} more whose creator is gone are mapped: in use)" if used else ""
    if not stale:
        measured = "no unmapped torch_* segment in /dev/shm outlives its creator" + in_use
        return _finding("stale shared memory", "ok", measured)
    size = sum(os.stat(f"/dev/shm/{name}").st_size for name in stale if os.path.exists(f"/dev/shm/{name}"))
    listed = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
    return _finding(
        "stale shared memory",
        "warn",
        f"{len(stale)} segment(s), {_size(size)}, creator gone and mapped by no process: {listed}{in_use}",
    )


_MP_CHILD = ("--multiprocessing-fork", "multiprocessing.spawn", "multiprocessing.forkserver")


def _orphans() -> list:
    """Python processes of this user whose launcher is gone, by parentage and lineage, any start method.

    A worker whose parent died is re-parented to PID 1 (or a subreaper): a spawn/forkserver child
    (its command line says so) whose parent is now not Python, or any Python process adopted by a
    PID 1 that is not Python (an init, a shell) while it stays in a process group that is neither
    its own nor PID 1's: a fork child keeps its launcher's command line, but not its parent. The
    workers of an orphaned forkserver are its children, so they count too. Where PID 1 is the
    launcher itself (``docker run image python train.py``), its children are healthy.
    """
    import psutil

    init_is_python = False
    with contextlib.suppress(psutil.Error):
        init_is_python = "python" in " ".join(psutil.Process(1).cmdline()).lower()
    found = []
    for proc in psutil.process_iter(["pid", "ppid", "name", "cmdline", "uids"]):
        with contextlib.suppress(psutil.Error, OSError):
            cmdline = " ".join(proc.info["cmdline"] or [])
            if not _mine(proc) or "python" not in (proc.info["name"] + cmdline).lower():
                continue
            ppid, group = proc.info["ppid"], os.getpgid(proc.pid)
            mp_child = any(marker in cmdline for marker in _MP_CHILD)
            if ppid == 1 and not init_is_python and (mp_child or group not in (0, 1, proc.pid)):
                found.append(proc)
            elif mp_child and ppid > 1 and "python" not in " ".join(psutil.Process(ppid).cmdline()).lower():
                found.append(proc)
    for server in [p for p in found if "multiprocessing.forkserver" in " ".join(p.info["cmdline"] or [])]:
        with contextlib.suppress(psutil.Error):  # an orphaned forkserver's workers are orphans too
            found += [child for child in server.children() if child.pid not in {p.pid for p in found}]
    return found


def _check_orphans() -> Finding:
    orphans = _orphans()
    if not orphans:
        return _finding("orphaned workers", "ok", "no Python worker of this user has lost its launcher")
    listed = ", ".join(f"pid {p.pid}" for p in orphans[:8]) + (" ..." if len(orphans) > 8 else "")
    return _finding(
        "orphaned workers",
        "warn",
        f"{len(orphans)} Python process(es) adopted after their launcher died: {listed}",
    )


def _ptrace_scope() -> int | None:
    """Yama's ptrace_scope (0 classic, 1 descendants only, 2 admin only, 3 none); None without Yama."""
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        return None


def _has_cap_sys_ptrace() -> bool:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path("/proc/self/status").read_text().splitlines()
        mask = next(line for line in status if line.startswith("CapEff:")).split()[1]
        return bool(int(mask, 16) >> 19 & 1)  # CAP_SYS_PTRACE is capability 19
    return False


def _check_stack_dumps() -> Finding:
    from helpers.debugging import py_spy_path

    spy, scope, cap = py_spy_path(), _ptrace_scope(), _has_cap_sys_ptrace()
    measured = (
        f"py-spy {spy or 'not installed'}; Yama ptrace_scope {'absent' if scope is None else scope}; "
        f"CAP_SYS_PTRACE {'yes' if cap else 'no'}"
    )
    if spy is None:
        return _finding("stack dumps", "warn", measured)
    if scope == 3 or (scope in (1, 2) and not cap):
        return _finding("stack dumps", "warn", measured + ": py-spy may attach only to its own children")
    return _finding("stack dumps", "ok", measured)


# --- Per-process checks: this process (inside), or another one by pid (from outside) -------------


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
        return _finding("threads before fork", "n/a", measured)
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
    return _finding("threads before fork", "warn" if risky else "ok", measured)


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
        return _finding(
            "CUDA initialised", "ok", "no: this torch is a CPU build (CUDA cannot be initialised)"
        )
    driver = _cuda_driver_open(os.getpid() if pid is None else pid)
    if pid is None:
        initialised = torch.cuda.is_initialized()
        measured = (
            f"torch.cuda.is_initialized() = {initialised}; CUDA driver initialised (is_available() does "
            f"this) = {bool(driver)}; default start method {default_start_method()}"
        )
        risky = (initialised or driver) and default_start_method() == "fork"
        return _finding("CUDA initialised", "warn" if risky else "ok", measured)
    if driver is None:
        return _finding("CUDA initialised", "n/a", f"cannot read /proc/{pid}/fd (another user's process?)")
    if driver:
        return _finding(
            "CUDA initialised",
            "warn",
            f"pid {pid} holds /dev/nvidia-uvm open: it has initialised the CUDA driver, so its fork "
            "children cannot use CUDA",
        )
    return _finding("CUDA initialised", "ok", f"no: pid {pid} has not opened the CUDA driver")


def _check_children(pid: int | None) -> Finding:
    import psutil

    if pid is None:
        children = live_children()
    else:
        children = [
            c for c in psutil.Process(pid).children(recursive=True) if _safe(c.status) != psutil.STATUS_ZOMBIE
        ]
    if not children:
        return _finding("leftover children", "ok", "none alive")
    listed = ", ".join(f"pid {c.pid} ({_safe(c.name)})" for c in children[:5])
    return _finding("leftover children", "warn", f"{len(children)} alive: {listed}")


def _safe(call: Callable[[], str]) -> str:
    import psutil

    try:
        return call()
    except psutil.Error:
        return "?"


def _in_kernel(pid: int | None) -> bool:
    if pid is None:
        shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
        return shell is not None and getattr(shell, "kernel", None) is not None
    import psutil

    return "ipykernel" in " ".join(psutil.Process(pid).cmdline())


def _check_kernel(pid: int | None) -> Finding:
    if not _in_kernel(pid):
        return _finding("Jupyter kernel", "ok", "not a Jupyter kernel")
    method = default_start_method() if pid is None else "unknown from outside"
    risky = method != "fork"
    measured = f"a Jupyter kernel, default start method {method}: " + (
        "cell-defined workers run only under fork; spawn/forkserver import them from a module"
        if not risky
        else "a worker defined in a cell fails in the child"
    )
    return _finding("Jupyter kernel", "warn" if risky else "ok", measured)


# --- Targets and imports: always in a fresh interpreter, with a deadline ---------------------------

_PROBE = """
import importlib, json, multiprocessing, os, pickle, sys, time
from multiprocessing.process import BaseProcess
sys.path[:0] = {path!r}
started = time.perf_counter()
info = {{"started": 0}}
multiprocessing.set_start_method({method!r}, force=True)  # as in a spawn child: set before the import
start = BaseProcess.start
def counted(self):
    info["started"] += 1
    start(self)
BaseProcess.start = counted  # every multiprocessing/torch.multiprocessing process, DataLoader workers too
try:
    module = importlib.import_module({module!r})
except ModuleNotFoundError as error:
    info["missing"] = error.name
except BaseException as error:
    info["import_error"] = f"{{type(error).__name__}}: {{error}}"
else:
    info["import_s"] = round(time.perf_counter() - started, 2)
    obj = missing = object()
    for number, part in enumerate({attribute!r}.split(".") if {attribute!r} else []):
        obj = getattr(module if number == 0 else obj, part, missing)
    if obj is missing and {attribute!r}:
        info["no_attribute"] = True
    elif {attribute!r}:
        info["qualname"] = getattr(obj, "__qualname__", repr(obj))
        info["callable"] = callable(obj)
        try:
            pickle.loads(pickle.dumps(obj))
        except Exception as error:
            info["pickle_error"] = f"{{type(error).__name__}}: {{error}}"
torch = sys.modules.get("torch")
info["cuda_initialised"] = bool(torch is not None and torch.cuda.is_initialized())
fds = os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []  # is_available() opens it:
info["cuda_driver"] = any(os.path.realpath("/proc/self/fd/" + fd) == "/dev/nvidia-uvm" for fd in fds)
print("DOCTOR-PROBE " + json.dumps(info))
"""


def _probe(module: str, attribute: str, timeout: float) -> dict:
    """Import ``module`` (and look up ``attribute``) in a fresh interpreter with this sys.path.

    The interpreter runs in a session of its own; whatever the import started (an unguarded
    script's workers) is killed with it, when it is done or when ``timeout`` passes.
    """
    method = mp.get_all_start_methods()[0]
    code = _PROBE.format(path=[p for p in sys.path if p], module=module, attribute=attribute, method=method)
    session = hasattr(os, "killpg")
    probe = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=session,
    )
    try:
        out, err = probe.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = None, ""
    finally:
        if session:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(probe.pid, signal.SIGKILL)
        probe.kill()
        probe.communicate()
    if out is None:
        return {"timed_out": timeout}
    for line in out.splitlines():
        if line.startswith("DOCTOR-PROBE "):
            return json.loads(line.removeprefix("DOCTOR-PROBE "))
    return {"import_error": (err.strip().splitlines() or [f"exit code {probe.returncode}"])[-1]}


_TARGET = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_<][\w<>]*(\.[A-Za-z_<][\w<>]*)*$")


def _parse_target(target: str) -> tuple[str, str]:
    if not isinstance(target, str) or not _TARGET.match(target.strip()):
        raise DoctorError(
            f"malformed target {target!r}: expected module:function, e.g. helpers.debugging:sleep_for"
        )
    module, _, attribute = target.strip().partition(":")
    return module, attribute


def _check_target(target: str | Callable, timeout: float) -> Finding:
    from helpers.launch import NotImportableError, check_importable

    if callable(target) and not isinstance(target, str):
        try:
            check_importable(target, "spawn")
        except NotImportableError as error:
            return _finding("target importable", "fail", str(error).split(". Fix:")[0])
        if target.__module__ == "__main__":  # check_importable passed: a script run as a file or with -m
            main = sys.modules["__main__"]
            where = getattr(main, "__file__", None) or main.__spec__.name
            measured = (
                f"{target.__qualname__} is defined in the script {where}, which a spawn child imports again"
            )
            return _finding(
                "target importable", "ok", measured + " as __mp_main__ (keep its work under the guard)"
            )
        target = f"{target.__module__}:{target.__qualname__}"
    module, attribute = _parse_target(target)
    if module == "__main__":
        return _finding(
            "target importable", "fail", f"{target}: defined in __main__, which a child cannot import"
        )
    info = _probe(module, attribute, timeout)
    missing = info.get("missing") or "\0"
    if module == missing or module.startswith(missing + "."):
        raise DoctorError(f"cannot import target {target!r}: no module named {info['missing']!r}")
    if info.get("no_attribute"):
        raise DoctorError(
            f"cannot import target {target!r}: module {module!r} has no attribute {attribute!r}"
        )
    if "timed_out" in info:
        return _finding(
            "target importable",
            "fail",
            f"importing {module} took over {timeout:.0f} s (work at import time?)",
        )
    if "context has already been set" in info.get("import_error", ""):
        measured = (
            f"importing {module} calls set_start_method(), which fails in a spawn or forkserver child "
            "(its start method is set before it imports): call it under if __name__ == '__main__':"
        )
        return _finding("target importable", "fail", measured)
    if "import_error" in info or "missing" in info:
        error = info.get("import_error") or f"No module named {info['missing']!r}"
        return _finding(
            "target importable", "fail", f"importing {module} in a fresh interpreter failed: {error}"
        )
    if info["started"]:
        measured = (
            f"importing {module} started {info['started']} process(es): the import ran the job (a "
            "DataLoader with workers, a Pool or mp.spawn at top level?), and every spawn child that "
            "imports it runs it again; move that code under if __name__ == '__main__':"
        )
        return _finding("target importable", "fail", measured)
    qualname = info["qualname"]
    if "<lambda>" in qualname or "<locals>" in qualname:
        problem = "a lambda" if "<lambda>" in qualname else "a nested function"
        return _finding(
            "target importable", "fail", f"{target} is {problem} ({qualname}): it cannot be pickled by name"
        )
    if "pickle_error" in info:
        return _finding("target importable", "fail", f"{target} does not pickle: {info['pickle_error']}")
    if not info["callable"]:
        return _finding("target importable", "fail", f"{target} is not callable")
    cuda = "; importing it initialises CUDA" if info["cuda_initialised"] or info["cuda_driver"] else ""
    measured = f"{target} imports in a fresh interpreter in {info['import_s']} s and pickles by name{cuda}"
    return _finding("target importable", "warn" if cuda else "ok", measured)


def _which_imports_initialise_cuda(modules: Sequence[str], timeout: float = 60.0) -> list[str]:
    """The modules among ``modules`` whose import initialises CUDA, each imported in a fresh interpreter.

    Such an import poisons every later fork that touches CUDA. It counts when torch says so
    (``torch.cuda.is_initialized()``) and when the import opened the CUDA driver without it
    (``torch.cuda.is_available()`` does). A CPU build of torch never
    initialises CUDA, so the answer there is ``[]``. Raises :class:`DoctorError` for a module
    that cannot be imported. Notebook 04 §4 (fork versus CUDA) teaches why it matters.

    >>> _which_imports_initialise_cuda(["json"])
    []
    """
    found = []
    for module in modules:
        info = _probe(module, "", timeout)
        if "timed_out" in info or "missing" in info or "import_error" in info:
            reason = info.get("import_error") or info.get("missing") or f"over {timeout:.0f} s"
            raise DoctorError(f"cannot import {module!r} in a fresh interpreter: {reason}")
        if info["cuda_initialised"] or info.get("cuda_driver"):  # is_available() opens the driver only
            found.append(module)
    return found


def _check_imports(modules: Sequence[str], timeout: float) -> Finding:
    try:
        culprits = _which_imports_initialise_cuda(modules, timeout)
    except DoctorError as error:
        return _finding("imports initialise CUDA", "fail", str(error))
    if culprits:
        return _finding(
            "imports initialise CUDA", "warn", f"these initialise CUDA on import: {', '.join(culprits)}"
        )
    return _finding(
        "imports initialise CUDA", "ok", f"none of {', '.join(modules)} initialises CUDA on import"
    )


# --- check(): run them all -------------------------------------------------------------------------


def check(
    target: str | Callable | None = None,
    *,
    pid: int | None = None,
    this_process: bool = True,
    processes: int = 1,
    shm_path: str = "/dev/shm",
    shm_need: int = DEFAULT_SHM_NEED,
    mem_need: int | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    imports: Sequence[str] = (),
    only: Sequence[str] | None = None,
    timeout: float = 30.0,
) -> list[Finding]:
    """Measure what decides whether a multiprocessing launch works here; one :class:`Finding` per check.

    - ``target``: the worker, as ``"module:function"`` or the function itself; checked in a fresh
      interpreter (importable, not a lambda or nested function, pickles by name).
    - Per-process checks (threads already started, CUDA initialised, leftover children, running
      in a Jupyter kernel) look at this process (``this_process``, the default: call ``check()``
      inside the job's script or kernel), or at process ``pid`` from outside; with
      ``this_process=False`` and no ``pid`` (a fresh command line) they report ``n/a``.
    - ``processes``: how many workers the job starts (for oversubscription); ``shm_path`` and
      ``shm_need`` (bytes): where shared memory lives and how much the job needs; ``mem_need``
      (bytes): the job's memory (default: ``processes`` x ``DEFAULT_WORKER_MEM``);
      ``master_addr``/``master_port``: the rendezvous (default: MASTER_ADDR/MASTER_PORT, else
      torchrun's ports 29500 and 29400); ``imports``: modules to test for CUDA initialisation on import.
    - ``only``: names from :data:`CHECKS` to run (default: all that apply).

    Raises :class:`DoctorError` for a malformed or unimportable target. Notebook 00 (your
    environment) prints it; notebook 08 diagnoses a bad target and a hung child with it.

    >>> [f.name for f in check(only=["open files", "master port"], master_port=0)]
    ['open files', 'master port']
    """
    if pid is not None:
        import psutil

        if not psutil.pid_exists(pid):
            raise DoctorError(f"no process with pid {pid}")
    unknown = sorted(set(only or ()) - set(CHECKS))
    if unknown:
        raise DoctorError(f"unknown check(s) {unknown}; choose from {list(CHECKS)}")
    inside = this_process and pid is None
    per_process = inside or pid is not None
    runs: dict[str, Callable[[], Finding]] = {
        "python and torch": _check_versions,
        "default start method": _check_start_method,
        "threads before fork": lambda: (
            _check_threads(pid) if per_process else _not_here("threads before fork")
        ),
        "CPU threads": lambda: _check_cpu_threads(processes, outside=pid is not None),
        "CUDA initialised": lambda: _check_cuda(pid) if per_process else _not_here("CUDA initialised"),
        "shared memory": lambda: _check_shared_memory(shm_path, shm_need),
        "memory": lambda: _check_memory(mem_need, processes),
        "open files": lambda: _check_open_files(pid),
        "hostname": lambda: _check_hostname(master_addr, timeout=min(timeout, 5.0)),
        "master port": lambda: _check_master_port(master_port),
        "leftover children": lambda: _check_children(pid) if per_process else _not_here("leftover children"),
        "orphaned workers": _check_orphans,
        "stale shared memory": _check_stale_shared_memory,
        "Jupyter kernel": lambda: _check_kernel(pid) if per_process else _not_here("Jupyter kernel"),
        "stack dumps": _check_stack_dumps,
    }
    if target is not None:
        runs["target importable"] = lambda: _check_target(target, timeout)
    if imports:
        runs["imports initialise CUDA"] = lambda: _check_imports(imports, timeout)
    wanted = [name for name in CHECKS if name in runs and (only is None or name in only)]
    return [runs[name]() for name in wanted]


def format_findings(findings: Sequence[Finding], details: bool = True) -> str:
    """The findings as a table (status, check, what was measured), then why and the fix for each problem.

    ``details=False`` leaves out the explanations. Notebook 00 prints it line by line.

    >>> print(format_findings([Finding("open files", "ok", "soft 4096", "why", "fix", "02 §5", "#973")]))
    status  check       measured
    ok      open files  soft 4096
    """
    width = max([len("check"), *(len(f.name) for f in findings)])
    lines = [f"{'status':<6}  {'check':<{width}}  measured"]
    for f in findings:
        measured = textwrap.wrap(f.measured, 100 - width) or [""]
        lines.append(f"{f.status:<6}  {f.name:<{width}}  {measured[0]}")
        lines += [f"{'':<6}  {'':<{width}}  {more}" for more in measured[1:]]
    problems = [f for f in findings if f.status in ("warn", "fail")]
    if details and problems:
        for f in problems:
            lines.append("")
            lines += textwrap.wrap(f"{f.status.upper()} {f.name}: {f.why}", 110, subsequent_indent="  ")
            lines += textwrap.wrap(f"fix: {f.fix}", 110, initial_indent="  ", subsequent_indent="    ")
            lines += textwrap.wrap(
                f"taught in: {f.teaches}; prevents: {f.prevents}",
                110,
                initial_indent="  ",
                subsequent_indent="    ",
            )
    return "\n".join(lines)


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

    Notebook 08 section 1 prints them, through :func:`format_inspection`.
    """

    pid: int
    ppid: int
    name: str
    cmdline: str
    status: str
    waits: dict[str, int]  # "futex [futex_do_wait] in libgomp.so.1" -> number of threads there
    stack: str  # the Python stacks, or why they could not be read
    stack_source: str  # "py-spy", "faulthandler (SIGUSR1)" or "none"


def register_stack_dump() -> int | None:
    """Let :func:`inspect` read this process's Python stacks without ptrace: faulthandler on SIGUSR1.

    The stacks go to an anonymous in-memory file (``memfd``) that :func:`inspect` finds through
    ``/proc/PID/fd`` and reads after sending SIGUSR1, where ``py-spy`` cannot attach (a container
    without ``SYS_PTRACE``). Processes started by ``helpers.launch.launch`` call it. Returns the
    fd, or None where memfd does not exist (not Linux). Notebook 08 §1 uses it.

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
    :class:`DoctorError` when ``pid`` does not exist. Notebook 08 §1 diagnoses a hung child with it.

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
    Notebook 08 section 1 prints it for a hung job.

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


# --- The command line -------------------------------------------------------------------------------


def _bytes(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 2G)")
    return int(float(match.group(1)) * 1024 ** " kmgt".index(match.group(2) or " "))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the usage too)
        raise DoctorError(message)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m helpers.doctor``: print the findings (or ``--inspect PID``); 1 if a check fails.
    Not used by a notebook: the README's doctor section shows the command; notebook 00 section 5 calls
    :func:`check` in-process.

    Bad input prints one line and returns 2, never a traceback.

    >>> main(["--target", "no_such_module:fn", "--only", "target importable"])  # the line goes to stderr
    2
    """
    parser = _Parser(
        prog="python -m helpers.doctor",
        description=__doc__.split("\n\n")[0],
        epilog=f"checks: {', '.join(CHECKS)}. Exit code 1 when a check fails, 2 for bad input.",
    )
    parser.add_argument("--target", help="the worker, as module:function")
    parser.add_argument("--pid", type=int, help="run the per-process checks against this running process")
    parser.add_argument("--inspect", type=int, metavar="PID", help="report a stuck job's process tree")
    parser.add_argument("--nprocs", type=int, default=1, help="how many worker processes the job starts")
    parser.add_argument(
        "--shm-need",
        type=_bytes,
        default=DEFAULT_SHM_NEED,
        help="shared memory the job needs, e.g. 2G (default 512M)",
    )
    parser.add_argument(
        "--mem-need", type=_bytes, help="memory the whole job needs, e.g. 8G (default: nprocs x 1G)"
    )
    parser.add_argument("--shm-path", default="/dev/shm", help="where shared memory lives (default /dev/shm)")
    parser.add_argument("--master-addr", help="the rendezvous host (default: $MASTER_ADDR)")
    parser.add_argument(
        "--master-port", type=int, help="the rendezvous port (default: $MASTER_PORT, else 29500; 29400 too)"
    )
    parser.add_argument(
        "--imports", default="", help="comma-separated modules: does importing them initialise CUDA?"
    )
    parser.add_argument("--only", action="append", help="run only this check (repeatable)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds for each probe (default 30)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--brief", action="store_true", help="the table only, no explanations")
    try:
        args = parser.parse_args(argv)
        if args.inspect is not None:
            reports = inspect(args.inspect, timeout=args.timeout)
            print(
                json.dumps([dataclasses.asdict(r) for r in reports], indent=1)
                if args.json
                else format_inspection(reports)
            )
            return 0
        findings = check(
            args.target,
            pid=args.pid,
            this_process=False,
            processes=args.nprocs,
            shm_path=args.shm_path,
            shm_need=args.shm_need,
            mem_need=args.mem_need,
            master_addr=args.master_addr,
            master_port=args.master_port,
            imports=[m for m in args.imports.split(",") if m.strip()],
            only=args.only,
            timeout=args.timeout,
        )
    except DoctorError as error:
        print(f"doctor: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([dataclasses.asdict(f) for f in findings], indent=1))
    else:
        print(format_findings(findings, details=not args.brief))
    return 1 if any(f.status == "fail" for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
