"""The doctor's checks of this machine: versions, start method, CPUs, memory, files, network, leftovers."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import multiprocessing as mp
import os
import platform
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from helpers.doctor.findings import (
    BINDING_VARIABLES,
    CPU_BINDING_FIX,
    CPU_BINDING_WHY,
    DEFAULT_WORKER_MEM,
    DOCKER_DEFAULT_SHM,
    TORCHRUN_DEFAULT_PORT,
    TORCHRUN_RDZV_PORT,
    Finding,
    finding,
)
from helpers.environment import (
    TESTED_PYTHONS,
    TESTED_TORCH,
    cgroup_cpu_quota,
    cgroup_memory,
    default_start_method,
    usable_cpus,
)
from helpers.processes import dev_shm_entries, held_dev_shm_entries

# helpers.doctor.check runs the checks; platform_checks reads ptrace and resolves names with these
__all__ = ["machine_checks_for", "ptrace_scope", "has_cap_sys_ptrace", "resolves_within"]

# --- Machine checks -------------------------------------------------------------------------------


def machine_checks_for(
    *,
    pid: int | None,
    processes: int,
    shm_path: str,
    shm_need: int,
    mem_need: int | None,
    master_addr: str | None,
    master_port: int | None,
    timeout: float,
) -> dict[str, Callable[[], Finding]]:
    """The checks of this machine by name, each ready to run with :func:`helpers.doctor.check`'s
    arguments (it documents them; ``pid`` is only read for its open-file limit and for whether the
    CPU check looks from outside).

    >>> runs = machine_checks_for(pid=None, processes=1, shm_path="/dev/shm", shm_need=0, mem_need=None,
    ...                           master_addr=None, master_port=0, timeout=5.0)
    >>> runs["open files"]().name, "stack dumps" in runs
    ('open files', True)
    """
    return {
        "python and torch": _check_versions,
        "helpers package": _check_helpers_package,
        "default start method": _check_start_method,
        "CPU threads": lambda: _check_cpu_threads(processes, outside=pid is not None),
        "shared memory": lambda: _check_shared_memory(shm_path, shm_need),
        "memory": lambda: _check_memory(mem_need, processes),
        "open files": lambda: _check_open_files(pid),
        "hostname": lambda: _check_hostname(master_addr, timeout=min(timeout, 5.0)),
        "master port": lambda: _check_master_port(master_port),
        "orphaned workers": _check_orphans,
        "stale shared memory": _check_stale_shared_memory,
        "stack dumps": _check_stack_dumps,
    }


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _check_versions(python: str | None = None, torch_version: str | None = None) -> Finding:
    import torch

    python = python or platform.python_version()
    torch_version = torch_version or torch.__version__
    py = tuple(int(p) for p in re.findall(r"\d+", python)[:2])
    th = tuple(int(p) for p in re.findall(r"\d+", torch_version)[:2])
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build"
    measured = f"Python {python}, torch {torch_version} ({build})"
    newest = tuple(int(p) for p in re.findall(r"\d+", TESTED_TORCH)[:3])
    full = tuple(int(p) for p in re.findall(r"\d+", torch_version.split("+")[0])[:3])
    if full > newest:
        return finding(
            "python and torch",
            "warn",
            f"{measured}: newer than {TESTED_TORCH}, the newest torch the series was tested on; if a "
            f"notebook fails, pin that one: pip install torch=={TESTED_TORCH}",
        )
    tested = TESTED_PYTHONS[0] <= py <= TESTED_PYTHONS[1] and (2, 11) <= th
    if tested and py >= (3, 14) and sys.platform.startswith("linux"):
        measured += " (tested; the Linux default start method is now forkserver)"
    return finding(
        "python and torch", "ok" if tested else "warn", measured + ("" if tested else ", untested")
    )


def _check_helpers_package(folders: list[Path] | None = None) -> Finding:
    """A ``helpers`` in a folder a notebook or script starts from (this folder, its ``notebooks/``,
    ``PYTHONPATH``) that is not the package running this check: it shadows the series' package there."""
    ours = Path(__file__).resolve().parent.parent
    if folders is None:
        here = Path.cwd()
        extra = [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        folders = [here, here / "notebooks", *extra]
    shadows = [
        candidate
        for folder in folders
        for candidate in (folder / "helpers.py", folder / "helpers")
        if candidate.exists() and candidate.resolve() != ours
    ]
    measured = f"the series' helpers: {ours}"
    if shadows:
        return finding("helpers package", "warn", f"{measured}; shadowed where started from: {shadows[0]}")
    return finding(
        "helpers package", "ok", f"{measured}; no helpers.py in {', '.join(map(str, folders[:2]))}"
    )


def _check_start_method() -> Finding:
    env_var = "MP_DEFAULT_START_METHOD"  # the test suite's switch (conftest.py)
    platform_default = mp.get_all_start_methods()[0]
    effective = default_start_method()
    measured = f"{effective} (platform default {platform_default}; Python 3.14+ on Linux: forkserver)"
    if effective != platform_default:
        forced_by_env = os.environ.get(env_var, "").strip() == effective
        why = f"{env_var}={effective} (conftest.py)" if forced_by_env else "set_start_method()"
        return finding("default start method", "warn", f"{effective}, forced by {why}; {measured}")
    return finding("default start method", "ok", measured)


def _affinity_around_import(timeout: float = 60.0) -> tuple[int, int] | None:
    """CPUs a fresh interpreter with this environment may use before and after ``import torch``, or
    None where that cannot be read. The interpreter first widens its affinity to every CPU (the kernel
    keeps only those its cpuset allows): it inherits this process's, which torch may already have bound."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    code = (
        "import os\n"
        "try:\n    os.sched_setaffinity(0, range(os.cpu_count() or 1))\nexcept OSError:\n    pass\n"
        "before = len(os.sched_getaffinity(0))\nimport torch\n"
        "print(before, len(os.sched_getaffinity(0)))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, check=False
        )
        before, after = (int(n) for n in done.stdout.split())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    return before, after


def _check_cpu_threads(processes: int, outside: bool = False) -> Finding:
    """torch's thread count here (from outside a process: what a new one gets) against usable CPUs;
    with an OpenMP binding variable set, whether importing torch binds a process to fewer CPUs."""
    import torch

    threads = torch.get_num_threads()
    usable = usable_cpus()
    omp = os.environ.get("OMP_NUM_THREADS")
    quota = cgroup_cpu_quota()
    default = " (a new process's default)" if outside else ""
    measured = (
        f"{processes} process(es) x {threads} torch thread(s){default}"
        f" = {processes * threads} on {usable} usable "
        f"CPU(s) (cpu_count {os.cpu_count()}, quota {quota if quota else 'none'}); "
        f"OMP_NUM_THREADS={omp or 'unset'}"
    )
    over = processes * threads > usable or (omp is not None and omp.isdigit() and int(omp) > usable)
    binding = {name: os.environ[name] for name in BINDING_VARIABLES if os.environ.get(name, "").strip()}
    around = _affinity_around_import() if binding else None
    if around and around[1] < around[0]:
        settings = ", ".join(f"{name}={value}" for name, value in binding.items())
        measured += (
            f"; importing torch binds a process to {around[1]} of {around[0]} CPU(s) ({settings}),"
            " and every child inherits it"
        )
        bound = finding("CPU threads", "warn", measured)
        return dataclasses.replace(bound, why=CPU_BINDING_WHY, fix=CPU_BINDING_FIX)
    return finding("CPU threads", "warn" if over else "ok", measured)


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
        return finding("shared memory", "fail", f"{path}: cannot measure ({error.strerror})")
    total, free = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
    container = _container()
    measured = (
        f"{path}: {_size(free)} free of {_size(total)}, need {_size(need)}; container: {container or 'no'}"
    )
    if free < need:
        return finding("shared memory", "fail", measured)
    if total <= DOCKER_DEFAULT_SHM:
        return finding("shared memory", "warn", measured + " (Docker's 64 MB default)")
    return finding("shared memory", "ok", measured)


def _check_memory(need: int | None, processes: int) -> Finding:
    """The job's memory need against what is available here, the cgroup's room and swap."""
    import psutil

    memory, swap, cgroup = psutil.virtual_memory(), psutil.swap_memory(), cgroup_memory()
    figure = f" ({processes} x {_size(DEFAULT_WORKER_MEM)} per worker, a rough figure: pass --mem-need)"
    need, source = (need, "") if need is not None else (processes * DEFAULT_WORKER_MEM, figure)
    room = memory.available if cgroup is None else min(memory.available, cgroup[0] - cgroup[1])
    limit = f"{_size(cgroup[1])} used of {_size(cgroup[0])}" if cgroup else "no limit"
    measured = (
        f"need {_size(need)}{source}; available {_size(memory.available)} of {_size(memory.total)}; "
        f"cgroup: {limit}; swap {_size(swap.free)} free of {_size(swap.total)}"
    )
    status = "ok" if need <= room else "warn" if need <= room + swap.free else "fail"
    return finding("memory", status, measured + ("" if status == "ok" else ": the OOM killer is near"))


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
    return finding("open files", _open_file_status(soft, strategy.split()[0]), measured)


def resolves_within(name: str, timeout: float) -> tuple[bool, str]:
    """(whether ``name`` resolves within ``timeout`` s, its first address or why not); getaddrinfo has no
    timeout of its own, so it runs in a daemon thread.

    >>> resolves_within("localhost", 5.0)[0]
    True
    """
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
    ok, address = resolves_within(fqdn, timeout)
    measured = f"getfqdn() = {fqdn} -> {address}"
    status = "ok" if ok else "warn"
    master_addr = master_addr if master_addr is not None else os.environ.get("MASTER_ADDR")
    if master_addr:
        ok_master, master = resolves_within(master_addr, timeout)
        measured += f"; MASTER_ADDR = {master_addr} -> {master}"
        if not ok_master:
            status = "fail"
    return finding("hostname", status, measured)


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
    return finding("master port", status, "; ".join(parts) + " (bound as TCPStore binds: IPv6 and IPv4)")


def _mine(proc) -> bool:
    me = os.getuid() if hasattr(os, "getuid") else None
    return me is None or not proc.info["uids"] or proc.info["uids"].real == me


def _check_stale_shared_memory() -> Finding:
    import psutil

    gone = set()
    for name in sorted(dev_shm_entries()):
        match = re.match(r"torch_(\d+)_", name)
        if match and not psutil.pid_exists(int(match.group(1))):
            gone.add(f"/dev/shm/{name}")
    held = held_dev_shm_entries() if gone else set()
    stale = sorted(Path(path).name for path in gone if Path(path).name not in held)
    used = len(gone) - len(stale)
    in_use = f" ({used} more whose creator is gone are mapped: in use)" if used else ""
    if not stale:
        measured = "no unmapped torch_* segment in /dev/shm outlives its creator" + in_use
        return finding("stale shared memory", "ok", measured)
    size = sum(os.stat(f"/dev/shm/{name}").st_size for name in stale if os.path.exists(f"/dev/shm/{name}"))
    listed = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
    return finding(
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
        return finding("orphaned workers", "ok", "no Python worker of this user has lost its launcher")
    listed = ", ".join(f"pid {p.pid}" for p in orphans[:8]) + (" ..." if len(orphans) > 8 else "")
    return finding(
        "orphaned workers",
        "warn",
        f"{len(orphans)} Python process(es) adopted after their launcher died: {listed}",
    )


def ptrace_scope(proc: str = "/proc") -> int | None:
    """Yama's ptrace_scope (0 classic, 1 descendants only, 2 admin only, 3 none); None without Yama.
    ``proc``: where procfs is mounted (a test's fake one).

    >>> ptrace_scope("/no/such/proc") is None
    True
    """
    try:
        return int(Path(proc, "sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        return None


def has_cap_sys_ptrace(proc: str = "/proc") -> bool:
    """Whether this process holds CAP_SYS_PTRACE (a container's default set does not).

    >>> has_cap_sys_ptrace("/no/such/proc")
    False
    """
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path(proc, "self/status").read_text().splitlines()
        mask = next(line for line in status if line.startswith("CapEff:")).split()[1]
        return bool(int(mask, 16) >> 19 & 1)  # CAP_SYS_PTRACE is capability 19
    return False


def _check_stack_dumps() -> Finding:
    from helpers.debugging import profiling_dump_command, py_spy_path

    spy, scope, cap = py_spy_path(), ptrace_scope(), has_cap_sys_ptrace()
    stdlib = profiling_dump_command(os.getpid()) is not None  # Python 3.15+
    measured = (
        f"py-spy {spy or 'not installed'}; python -m profiling.sampling dump "
        f"{'yes' if stdlib else 'no (Python 3.15+)'}; "
        f"Yama ptrace_scope {'absent' if scope is None else scope}; CAP_SYS_PTRACE {'yes' if cap else 'no'}"
    )
    if spy is None and not stdlib:
        return finding("stack dumps", "warn", measured)
    if scope == 3 or (scope in (1, 2) and not cap):
        tool = "py-spy" if spy else "profiling.sampling"
        return finding("stack dumps", "warn", measured + f": {tool} may attach only to its own children")
    return finding("stack dumps", "ok", measured)
