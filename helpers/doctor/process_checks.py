"""The doctor's per-process checks: this process (inside), or another one by pid (from outside)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from pathlib import Path

from helpers.doctor.findings import Finding, _finding
from helpers.doctor.inspector import _mappings, _safe, _thread_wait
from helpers.environment import default_start_method, kernel_subshells, off_main_thread
from helpers.processes import live_children

__all__: list[str] = []  # internal: helpers.doctor.check runs these

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
    return _finding("Jupyter kernel", "warn" if risky else "ok", measured)
