"""The doctor's checks of what a launcher, a scheduler and a container decide about a job: the thread count a
launcher sets (torchrun, Ray), the process and thread limits (``ulimit -u``, cgroup ``pids.max``), a Slurm
task layout against torchrun's, and a memory-backed /dev/shm charged to a container's memory limit.

Each check reads the environment, procfs and /sys/fs/cgroup through parameters a test may replace (a fake
environment, a fake cgroup folder, a fake mountinfo), because a scheduler or a container cannot be made on
a test machine.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from helpers.doctor.findings import Finding, finding
from helpers.doctor.machine_checks import _size  # one way to print a size in the doctor's tables
from helpers.environment import cgroup_memory, usable_cpus

__all__ = ["launch_checks_for"]  # helpers.doctor.check runs them

_READ = object()  # a parameter left to read from this machine


def launch_checks_for(
    *, processes: int, shm_path: str, nproc_per_node: int | None, nodes: int
) -> dict[str, Callable[[], Finding]]:
    """These checks by name, each ready to run with :func:`helpers.doctor.check`'s arguments (it documents
    them).

    >>> runs = launch_checks_for(processes=1, shm_path="/dev/shm", nproc_per_node=None, nodes=1)
    >>> runs["Slurm layout"]().name, sorted(runs)[0]
    ('Slurm layout', 'Slurm layout')
    """
    return {
        "launcher threads": lambda: _check_launcher_threads(processes),
        "process limit": lambda: _check_process_limit(processes, _torch_threads()),
        "shm counts as memory": lambda: _check_shm_memory(shm_path),
        "Slurm layout": lambda: _check_slurm_layout(nproc_per_node, nodes),
    }


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


# --- A launcher's thread count: OMP_NUM_THREADS=1 ----------------------------------------------------


def _launcher(env: Mapping[str, str]) -> str | None:
    """Which launcher this process runs under, by the variables it gives its workers, or None."""
    if env.get("TORCHELASTIC_RUN_ID") or any(name.startswith("TORCHELASTIC_") for name in env):
        return "torchrun (TORCHELASTIC_RUN_ID)"
    if env.get("RAY_RAYLET_PID") or env.get("RAY_JOB_ID"):
        return "Ray (RAY_RAYLET_PID/RAY_JOB_ID)"
    return None


def _check_launcher_threads(
    processes: int, env: Mapping[str, str] | None = None, usable: int | None = None
) -> Finding:
    """OMP_NUM_THREADS or MKL_NUM_THREADS at 1 while the usable CPUs outnumber the processes: each process
    (and what it runs: torch ops, a DataLoader's collate) uses one CPU. Under torchrun the processes on
    this node are its LOCAL_WORLD_SIZE."""
    env = os.environ if env is None else env
    usable = usable_cpus() if usable is None else usable
    launcher = _launcher(env)
    local = env.get("LOCAL_WORLD_SIZE", "")
    if launcher and launcher.startswith("torchrun") and local.isdigit():
        processes, counted = int(local), f"{local} process(es) on this node (torchrun's LOCAL_WORLD_SIZE)"
    else:
        counted = f"{processes} process(es)"
    settings = {name: env.get(name) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    shown = ", ".join(f"{name}={value if value is not None else 'unset'}" for name, value in settings.items())
    ones = [name for name, value in settings.items() if (value or "").strip() == "1"]
    measured = f"{shown}; {counted} on {usable} usable CPU(s)"
    if not ones:
        return finding("launcher threads", "ok", measured)
    source = f"set by {launcher}" if launcher else "set in the environment, no launcher seen"
    if processes >= usable:
        return finding(
            "launcher threads", "ok", f"{measured}; {ones[0]}=1 ({source}): one thread each fills the CPUs"
        )
    return finding(
        "launcher threads",
        "warn",
        f"{measured}; {ones[0]}=1 ({source}): each process runs torch ops on 1 thread, "
        f"{usable - processes} CPU(s) idle",
    )


# --- Processes and threads: RLIMIT_NPROC and the pids controller ------------------------------------


def _cgroup_pids(
    root: Path | str = "/sys/fs/cgroup", cgroup: str | None = None
) -> tuple[int, int, str] | None:
    """(pids.max, pids.current, its folder) of the tightest pids limit over this process's cgroup and its
    parents, v2 (``0::/path``) or v1 (``N:pids:/path``); None without one. ``cgroup``: the text of
    /proc/self/cgroup (a test's fake one); ``root``: where the cgroup file systems are mounted.

    >>> _cgroup_pids("/no/such/root", "0::/") is None
    True
    """
    root = Path(root)
    if cgroup is None:
        try:
            cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    found = []
    for line in cgroup.splitlines():
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy == "0":
            base = root
        elif "pids" in controllers.split(","):
            base = root / "pids"
        else:
            continue
        here = base / path.strip().lstrip("/")
        for folder in [here, *(p for p in here.parents if p.is_relative_to(base))]:
            with contextlib.suppress(OSError, ValueError):
                limit = (folder / "pids.max").read_text().strip()
                if limit != "max":
                    found.append((int(limit), int((folder / "pids.current").read_text()), str(folder)))
    return min(found, key=lambda entry: entry[0] - entry[1]) if found else None


def _user_threads(uid: int, proc: str = "/proc") -> int | None:
    """Threads of every process whose real user is ``uid``: what RLIMIT_NPROC counts; None without /proc."""
    total, seen = 0, False
    with contextlib.suppress(OSError):
        for entry in os.scandir(proc):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                status = Path(entry.path, "status").read_text()
                seen = True
                if int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)) == uid:
                    total += int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))
    return total if seen else None


def _exempt_from_nproc(uid: int, proc: str = "/proc") -> str | None:
    """Why RLIMIT_NPROC does not hold this process back, or None: the kernel (copy_process in kernel/fork.c)
    skips the check for root and for CAP_SYS_ADMIN or CAP_SYS_RESOURCE."""
    if uid == 0:
        return "root, for whom the kernel does not enforce it"
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path(proc, "self/status").read_text().splitlines()
        mask = int(next(line for line in status if line.startswith("CapEff:")).split()[1], 16)
        if mask >> 21 & 1 or mask >> 24 & 1:  # CAP_SYS_ADMIN is capability 21, CAP_SYS_RESOURCE 24
            return "CAP_SYS_ADMIN or CAP_SYS_RESOURCE, for which the kernel does not enforce it"
    return None


def _check_process_limit(
    processes: int,
    threads: int,
    *,
    rlimit: tuple[int, int] | None | object = _READ,
    uid: int | None = None,
    in_use: int | None | object = _READ,
    pids: tuple[int, int, str] | None | object = _READ,
    proc: str = "/proc",
) -> Finding:
    """The tasks a job starts, processes x (1 + threads), against the room under RLIMIT_NPROC (``ulimit -u``,
    which counts every thread of this user) and the cgroup's pids.max (every thread of the cgroup).

    ``rlimit``: (soft, hard), None where there is none; ``in_use``: this user's threads now; ``pids``:
    (pids.max, pids.current, folder) or None; each read from this machine when left out."""
    import resource

    if rlimit is _READ:
        rlimit = resource.getrlimit(resource.RLIMIT_NPROC) if hasattr(resource, "RLIMIT_NPROC") else None
    uid = os.getuid() if uid is None else uid
    pids = _cgroup_pids() if pids is _READ else pids
    need = processes * (1 + threads)
    plan = f"the job starts about {need} tasks ({processes} process(es) x (1 + {threads} torch threads))"
    parts, rooms = [plan], []
    soft = None if rlimit is None else rlimit[0]
    if soft is None or soft == resource.RLIM_INFINITY:
        parts.append("ulimit -u unlimited")
    else:
        used = _user_threads(uid, proc) if in_use is _READ else in_use
        exempt = _exempt_from_nproc(uid, proc)
        counted = f"{used} in use by uid {uid}" if used is not None else "use unknown"
        if exempt:
            parts.append(f"ulimit -u {soft} ({counted}) not enforced: {exempt}")
        else:
            room = soft - (used or 0)
            parts.append(f"ulimit -u {soft} ({counted}, {room} left)")
            rooms.append(room)
    if pids is None:
        parts.append("no cgroup pids.max")
    else:
        limit, current, folder = pids
        parts.append(f"pids.max {limit} ({current} in use, {limit - current} left; {folder})")
        rooms.append(limit - current)
    measured = "; ".join(parts)
    room = min(rooms) if rooms else None
    if room is not None and need > room:
        return finding(
            "process limit",
            "fail",
            measured + ": fork fails with 'Resource temporarily unavailable' (errno 11), a thread with "
            '"can\'t start new thread"',
        )
    if room is not None and 2 * need > room:
        return finding("process limit", "warn", measured + ": less than twice the room the job needs")
    return finding("process limit", "ok", measured)


# --- /dev/shm as memory under a cgroup limit ------------------------------------------------------


def _mount_of(path: str, mountinfo: str) -> tuple[str, str] | None:
    """(mount point, file system type) of the mount that holds ``path``, from /proc/self/mountinfo's text.

    >>> _mount_of("/dev/shm/x", "25 24 0:23 / /dev/shm rw - tmpfs tmpfs rw,size=65536k\\n1 0 8:1 / / rw - ext4 /dev/sda1 rw")
    ('/dev/shm', 'tmpfs')
    """
    best = None
    for line in mountinfo.splitlines():
        fields, _, after = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not after:
            continue
        point = parts[4].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, after.split()[0])
    return best


def _check_shm_memory(
    path: str,
    mountinfo: str | None = None,
    memory: tuple[int, int] | None | object = _READ,
    size: int | None = None,
) -> Finding:
    """Whether ``path`` (/dev/shm) is memory (tmpfs) under a cgroup memory limit: pages written there are
    charged to the writer's cgroup, so a full /dev/shm can be larger than the memory the limit leaves.

    ``mountinfo``: /proc/self/mountinfo's text; ``memory``: (limit, usage) or None; ``size``: the file
    system's size in bytes; each read from this machine when left out."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return finding("shm counts as memory", "n/a", "no /proc/self/mountinfo here (not Linux)")
    mount = _mount_of(os.path.realpath(path) if os.path.exists(path) else path, mountinfo)
    if mount is None:
        return finding("shm counts as memory", "n/a", f"{path}: no mount found in mountinfo")
    point, fstype = mount
    if fstype not in ("tmpfs", "shm"):
        return finding(
            "shm counts as memory",
            "ok",
            f"{path} is on {point} ({fstype}): its pages are not counted as memory",
        )
    if size is None:
        try:
            stats = os.statvfs(path)
            size = stats.f_blocks * stats.f_frsize
        except OSError:
            size = 0
    memory = cgroup_memory() if memory is _READ else memory
    measured = f"{path} is {fstype} on {point}, {_size(size)}"
    if memory is None:
        return finding(
            "shm counts as memory",
            "ok",
            measured + "; no cgroup memory limit: its pages count against the machine's memory only",
        )
    limit, usage = memory
    room = max(0, limit - usage)
    measured += (
        f"; cgroup memory limit {_size(limit)}, {_size(usage)} used, {_size(room)} left: pages written to "
        f"{point} count against it"
    )
    if size > room:
        return finding(
            "shm counts as memory",
            "warn",
            measured + f"; filling {point} would pass the limit: an OOM kill (-9) before 'No space left'",
        )
    return finding("shm counts as memory", "ok", measured)


# --- A Slurm allocation against a torchrun launch ---------------------------------------------------


def _first_int(text: str | None) -> int | None:
    """The first number of a Slurm count (``"4"``, ``"4(x2)"``, ``"2,1"``, ``"a100:4"`` -> its last)."""
    if not text:
        return None
    if ":" in text:
        text = text.rsplit(":", 1)[1]
    match = re.match(r"\s*(\d+)", text)
    return int(match.group(1)) if match else None


def _slurm_gpus(env: Mapping[str, str]) -> tuple[int, str] | None:
    """GPUs this node's step was given, and the variable that says so."""
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"):
        count = _first_int(env.get(name))
        if count is not None:
            return count, name
    for name in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        value = env.get(name, "").strip()
        if value:
            return len([d for d in value.split(",") if d.strip()]), name
    return None


def _check_slurm_layout(
    nproc_per_node: int | None, nodes: int, env: Mapping[str, str] | None = None
) -> Finding:
    """Slurm's tasks per node, nodes, CPUs per task and GPUs against the launch: torchrun's
    ``--nproc-per-node`` (None: no torchrun, srun's tasks are the ranks) and ``--nnodes``."""
    env = os.environ if env is None else env
    if not (env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")):
        return finding("Slurm layout", "ok", "not in a Slurm allocation (no SLURM_JOB_ID)")
    slurm_nodes = _first_int(env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES"))
    ntasks = _first_int(env.get("SLURM_NTASKS"))
    per_node = _first_int(env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE"))
    if per_node is None and ntasks and slurm_nodes:
        per_node = max(1, ntasks // slurm_nodes)
    cpus = _first_int(env.get("SLURM_CPUS_PER_TASK"))
    gpus = _slurm_gpus(env)
    launch = (
        f"torchrun --nnodes {nodes} --nproc-per-node {nproc_per_node}"
        if nproc_per_node
        else "srun tasks as ranks"
    )
    measured = (
        f"Slurm job {env.get('SLURM_JOB_ID') or env.get('SLURM_JOBID')}: {slurm_nodes or '?'} node(s), "
        f"{per_node or '?'} task(s) per node, {cpus or 'unset'} CPU(s) per task, "
        f"{f'{gpus[0]} GPU(s) ({gpus[1]})' if gpus else 'no GPU count'}; launch: {launch}"
    )
    problems: list[tuple[str, str]] = []
    if nproc_per_node:
        tasks = per_node or 1
        workers = tasks * nproc_per_node
        if tasks > 1:
            problems.append(
                (
                    "fail",
                    f"srun runs torchrun once per task: {tasks} agents per node x {nproc_per_node} = {workers} "
                    "workers per node, and the rendezvous sees each agent as a node (ranks clash or agents "
                    "wait): use --ntasks-per-node=1 with torchrun",
                )
            )
        if slurm_nodes is not None and slurm_nodes != nodes:
            problems.append(("fail", f"--nnodes {nodes} but Slurm allocated {slurm_nodes} node(s)"))
        if cpus is not None and nproc_per_node > cpus * tasks:
            problems.append(
                ("warn", f"{nproc_per_node} workers per agent on {cpus} CPU(s) per task: oversubscribed")
            )
    else:
        workers = per_node or 1
    if gpus and gpus[0] and workers > gpus[0]:
        problems.append(
            (
                "fail",
                f"{workers} process(es) per node on {gpus[0]} GPU(s): ranks past the last GPU get "
                "'invalid device ordinal' (or share a GPU)",
            )
        )
    if not problems:
        return finding("Slurm layout", "ok", measured)
    status = "fail" if any(level == "fail" for level, _ in problems) else "warn"
    return finding("Slurm layout", status, measured + "; " + "; ".join(text for _, text in problems))
