"""The doctor's checks of the operating system's limits a job meets beyond /dev/shm and open files: memory
maps, systemd-logind's RemoveIPC, CUDA IPC (platform, ptrace) and the address gloo binds on several nodes.

Each reads files (procfs, /etc, /run) under a root that a test may replace with a fake one, because
some conditions cannot be made on a test machine (a Yama setting, a logind configuration).
"""

from __future__ import annotations

import configparser
import ipaddress
import os
import re
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from helpers.doctor.findings import Finding, finding
from helpers.doctor.machine_checks import has_cap_sys_ptrace, ptrace_scope, resolves_within

__all__ = ["platform_checks_for"]  # helpers.doctor.check runs them

# 8 workers x prefetch_factor 2 batches x 4 tensors a batch: the storages a DataLoader's main process maps
# at once (--shared-tensors names the real number: a dataset of tensors sent to workers needs one each).
DEFAULT_SHARED_TENSORS = 8 * 2 * 4


def platform_checks_for(
    *, pid: int | None, shared_tensors: int | None, nodes: int, backend: str | None, timeout: float
) -> dict[str, Callable[[], Finding]]:
    """These checks by name, each ready to run with :func:`helpers.doctor.check`'s arguments (it documents
    them; ``pid``: whose memory maps are counted, this process's when None).

    >>> runs = platform_checks_for(pid=None, shared_tensors=10, nodes=1, backend=None, timeout=5.0)
    >>> runs["memory maps"]().name, sorted(runs)[0]
    ('memory maps', 'CUDA IPC')
    """
    return {
        "memory maps": lambda: _check_memory_maps(shared_tensors, pid),
        "logind RemoveIPC": _check_remove_ipc,
        "CUDA IPC": _check_cuda_ipc,
        "gloo interface": lambda: _check_gloo_interface(nodes, backend, timeout=min(timeout, 5.0)),
    }


# --- vm.max_map_count: one map per shared storage ---------------------------------------------------


def _check_memory_maps(need: int | None, pid: int | None = None, proc: str = "/proc") -> Finding:
    """The maps a job needs (one per shared CPU storage it holds at once) against those left to a process."""
    try:
        limit = int(Path(proc, "sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return finding("memory maps", "n/a", f"no {proc}/sys/vm/max_map_count here (not Linux)")
    who = "this process" if pid is None else f"pid {pid}"
    try:
        with open(Path(proc, "self" if pid is None else str(pid), "maps"), "rb") as maps:
            in_use = sum(1 for _ in maps)
    except OSError as error:
        return finding(
            "memory maps", "n/a", f"vm.max_map_count {limit}; cannot read {who}'s maps ({error.strerror})"
        )
    default = need is None
    need = DEFAULT_SHARED_TENSORS if need is None else need
    left = limit - in_use
    figure = (
        " (a DataLoader's: 8 workers x 2 batches x 4 tensors; pass --shared-tensors N)" if default else ""
    )
    measured = (
        f"vm.max_map_count {limit}, {in_use} maps in use by {who}, {left} left; the job needs {need}"
        f"{figure}, one per shared tensor held at once"
    )
    if need > left:
        return finding("memory maps", "fail", measured + ": 'unable to mmap ... Cannot allocate memory (12)'")
    return finding("memory maps", "warn" if need > left // 2 else "ok", measured)


# --- systemd-logind's RemoveIPC and lingering ---------------------------------------------------------


def _remove_ipc_setting(root: Path) -> tuple[bool, str]:
    """(RemoveIPC's value, where it comes from): logind.conf, then its drop-ins in order, the last wins;
    unset, the default that logind.conf's comment shows (systemd's own default is yes)."""
    value, source = True, "systemd's default"
    main = root / "etc/systemd/logind.conf"
    commented = re.search(r"^#\s*RemoveIPC\s*=\s*(\S+)", main.read_text(), re.M) if main.is_file() else None
    if commented:
        value, source = commented.group(1).lower() in ("yes", "true", "1", "on"), f"the default in {main}"
    for path in [main, *sorted((root / "etc/systemd/logind.conf.d").glob("*.conf"))]:
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        try:
            parser.read_string(path.read_text())
        except (OSError, configparser.Error):
            continue
        if parser.has_option("Login", "RemoveIPC"):
            value, source = parser.getboolean("Login", "RemoveIPC", fallback=True), str(path)
    return value, source


def _first_user_uid(root: Path) -> int:
    """UID_MIN of /etc/login.defs (1000 by default): logind spares users below it (system users)."""
    defs = root / "etc/login.defs"
    match = re.search(r"^\s*UID_MIN\s+(\d+)", defs.read_text(), re.M) if defs.is_file() else None
    return int(match.group(1)) if match else 1000


def _named_ipc_in_use(strategy: str | None = None, method: str | None = None) -> tuple[bool, str]:
    """(whether this process makes IPC objects that keep their name while in use, which RemoveIPC deletes;
    the sharing strategy and start method it read): ``file_system`` storages keep their /dev/shm name,
    spawn and forkserver contexts keep their semaphores' names; file_descriptor and fork unlink at once."""
    import multiprocessing

    import torch.multiprocessing as mp

    strategy = strategy or mp.get_sharing_strategy()
    method = (
        method
        or multiprocessing.get_start_method(allow_none=True)
        or multiprocessing.get_all_start_methods()[0]
    )
    return (
        strategy == "file_system" or method != "fork",
        f"sharing strategy {strategy}, start method {method}",
    )


def _check_remove_ipc(
    root: str = "/",
    uid: int | None = None,
    user: str | None = None,
    strategy: str | None = None,
    method: str | None = None,
) -> Finding:
    """Whether logind deletes this user's named IPC objects (/dev/shm files, semaphores) when the user's last
    session ends; a warning where this process makes such objects (``strategy``, ``method``: its own when None)."""
    base = Path(root)
    if not (base / "run/systemd/system").is_dir():  # sd_booted(): systemd is the init, logind may run
        return finding(
            "logind RemoveIPC", "ok", "systemd is not the init here (no /run/systemd/system): no logind"
        )
    uid = os.getuid() if uid is None else uid
    user = user or os.environ.get("USER") or str(uid)
    remove, source = _remove_ipc_setting(base)
    first = _first_user_uid(base)
    lingers = (base / "var/lib/systemd/linger" / user).exists()
    measured = (
        f"RemoveIPC={'yes' if remove else 'no'} ({source}); user {user} (uid {uid}, "
        f"system users below {first}); lingering {'yes' if lingers else 'no'}"
    )
    if remove and uid >= first and not lingers:
        named, used = _named_ipc_in_use(strategy, method)
        if named:
            return finding(
                "logind RemoveIPC",
                "warn",
                measured + f"; {used}: its named /dev/shm files and semaphores go when the last session ends",
            )
        return finding(
            "logind RemoveIPC",
            "ok",
            measured + f"; {used}: nothing named at risk (file_system storages or a spawn/forkserver"
            " context would be)",
        )
    return finding("logind RemoveIPC", "ok", measured)


# --- CUDA IPC: the platform, expandable segments and ptrace --------------------------------------------


def _expandable_segments(env: Mapping[str, str]) -> bool:
    conf = env.get("PYTORCH_CUDA_ALLOC_CONF") or env.get("PYTORCH_ALLOC_CONF") or ""
    return bool(re.search(r"expandable_segments\s*:\s*(true|1)", conf, re.I))


def _seccomp_filtered(proc: str) -> bool:
    """Whether a seccomp filter confines this process (``Seccomp: 2``), as a container's runtime sets one."""
    status = Path(proc, "self/status")
    text = status.read_text() if status.is_file() else ""
    return bool(re.search(r"^Seccomp:\s*2\s*$", text, re.M))


def _ptrace_refusal(scope: int | None, cap: bool, seccomp: bool = False) -> str | None:
    """Why pidfd_getfd from a receiving process may be refused, or None."""
    if seccomp and not cap:
        return "a seccomp filter without CAP_SYS_PTRACE (Docker's default profile allows pidfd_getfd only with it)"
    if scope == 3:
        return "Yama ptrace_scope 3: no process may take another's file descriptors"
    if scope == 2 and not cap:
        return "Yama ptrace_scope 2 without CAP_SYS_PTRACE: refused"
    if scope == 1 and not cap:
        return "Yama ptrace_scope 1: a receiver may take only its descendants' (a child receiving from its parent is refused)"
    return None


def _check_cuda_ipc(
    proc: str = "/proc",
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
    cuda: str | None = "",
) -> Finding:
    """Whether CUDA tensors can cross a torch Queue here. ``cuda``: this torch's CUDA version ("" reads it)."""
    import torch

    env = os.environ if env is None else env
    platform = platform or sys.platform
    cuda = torch.version.cuda if cuda == "" else cuda
    if not cuda:
        return finding("CUDA IPC", "ok", "this torch is a CPU build: no CUDA tensors to share")
    if platform == "win32":
        return finding("CUDA IPC", "warn", f"CUDA {cuda} on Windows, where CUDA IPC is not supported")
    scope, cap, seccomp = ptrace_scope(proc), has_cap_sys_ptrace(proc), _seccomp_filtered(proc)
    measured = (
        f"CUDA {cuda} on {platform}; Yama ptrace_scope {'absent' if scope is None else scope}; "
        f"CAP_SYS_PTRACE {'yes' if cap else 'no'}; seccomp filter {'yes' if seccomp else 'no'}"
    )
    if not _expandable_segments(env):
        return finding(
            "CUDA IPC", "ok", measured + "; expandable_segments off: cudaIpc handles, no ptrace needed"
        )
    measured += "; expandable_segments on: receivers take file descriptors with pidfd_getfd"
    if env.get("TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC", "").strip() == "0":
        return finding(
            "CUDA IPC", "warn", measured + ", but TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC=0 disables them"
        )
    refusal = _ptrace_refusal(scope, cap, seccomp)
    return finding("CUDA IPC", "warn" if refusal else "ok", measured + (f": {refusal}" if refusal else ""))


# --- The address gloo binds ------------------------------------------------------------------------------


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def _interface_addresses(name: str) -> list[str]:
    import psutil

    families = (socket.AF_INET, socket.AF_INET6)
    return [a.address for a in psutil.net_if_addrs().get(name, []) if a.family in families]


def _check_gloo_interface(
    nodes: int, backend: str | None, timeout: float, hostname: str | None = None
) -> Finding:
    """The address gloo announces: GLOO_SOCKET_IFNAME's interface, else what this host's name resolves to."""
    gloo = backend is None or "gloo" in backend
    several = nodes > 1 and gloo
    where = f"{nodes} node(s), backend {backend or 'not named'}"
    interface = os.environ.get("GLOO_SOCKET_IFNAME", "").strip()
    if interface:
        addresses = [a for name in interface.split(",") for a in _interface_addresses(name.strip())]
        measured = (
            f"GLOO_SOCKET_IFNAME={interface}: {', '.join(addresses) or 'no such interface here'}; {where}"
        )
        unusable = not addresses or (several and all(_loopback(a) for a in addresses))
        return finding("gloo interface", "fail" if unusable else "ok", measured)
    hostname = hostname or socket.gethostname()
    ok, address = resolves_within(hostname, timeout)
    measured = f"GLOO_SOCKET_IFNAME unset; hostname {hostname} -> {address}; {where}"
    if several and (not ok or _loopback(address)):
        fallback = "" if ok else " (unresolved: gloo falls back to 127.0.0.1)"
        return finding(
            "gloo interface",
            "fail",
            measured + f"{fallback}: ranks on other nodes cannot reach a loopback address",
        )
    if ok and _loopback(address):
        return finding("gloo interface", "ok", measured + " (loopback: fine on one node only)")
    return finding("gloo interface", "ok", measured)
