"""An environment report: the facts that decide how multiprocessing behaves on this machine.

Start methods, the sharing strategy, torch's thread runtime and CUDA all change what the notebooks
show, so each notebook can print this report first and a reader can compare their own.

Example::

    >>> from helpers.environment import environment_report, format_report
    >>> report = environment_report()
    >>> report["default_start_method"] in report["start_methods"]
    True
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing as mp
import os
import platform
import re
import subprocess
import sys
import threading
from pathlib import Path

__all__ = [
    "TESTED_PYTHONS",
    "TESTED_TORCH",
    "default_start_method",
    "usable_cpus",
    "cgroup_cpu_quota",
    "cgroup_memory",
    "environment_report",
    "format_report",
    "cuda_report",
    "kernel_subshells",
    "off_main_thread",
    "warn_if_off_main_thread",
]

# The newest torch the whole suite has passed on: the lock's pin (requirements/constraints.txt;
# tests/test_install.py keeps them equal). The doctor says when the running torch is newer.
TESTED_TORCH = "2.15.0"
# The Pythons the suite runs on (oldest, newest). The oldest may get an older torch (the lock's pin
# for it) where TESTED_TORCH needs a newer Python. The one place these are written: the docs are
# generated from them (tools/gen_docs.py) and tests/test_project.py checks pyproject.toml,
# environment.yml and the Makefile against the oldest.
TESTED_PYTHONS = ((3, 10), (3, 15))

# Run in a separate interpreter so this process never initialises CUDA (that would make later
# fork children that touch CUDA fail; see notebook 04).
_CUDA_PROBE = """
import json, torch
n = torch.cuda.device_count()
print(json.dumps({
    "cuda_devices": [torch.cuda.get_device_name(i) for i in range(n)],
    "cuda_runtime": torch.version.cuda,
    "cuda_driver": torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version") else None,
}))
"""


def default_start_method() -> str:
    """This platform's default start method, read without fixing it.

    ``multiprocessing.get_start_method()`` would *set* the default as a side effect, after which
    ``set_start_method`` raises; ``get_all_start_methods()`` lists the default first.

    Notebook 01 (set-up) and the test session's header.

    >>> default_start_method() in ("fork", "spawn", "forkserver")
    True
    """
    return mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0]


# --- Widget callbacks off the main thread (JupyterLab 4.4+ with ipykernel 7: kernel subshells) ------

_SUBSHELL_NOTICE = (
    "Note: this widget runs its code on a kernel subshell thread, not the kernel's main thread "
    "(JupyterLab 4.4 and newer with ipykernel 7 do this by default). torch sets some safety nets "
    "only from the main thread: a DataLoader started here learns that a worker crashed only from "
    "its own check every 5 seconds, and torchrun's launcher run here does not install its handlers "
    "for Ctrl-C and SIGTERM; a plot drawn here can also come out half drawn. To run widgets "
    "on the main thread, in JupyterLab: Settings > Settings Editor > Kernels > 'Kernel Comms over "
    "subshells' > Disabled, then reload the page (`make lab` sets this for you)."
)
_noticed = threading.Event()


def off_main_thread() -> bool:
    """Whether this code runs off the interpreter's main thread (in a kernel: on a subshell).

    ipykernel 7 serves each kernel subshell on its own thread (named ``subshell-ID``), and
    JupyterLab 4.4+ sends widget messages to one by default, so a widget's callback runs there.
    Handlers that Python lets only the main thread install (``signal.signal``) are then skipped.
    The widgets of notebooks 01 to 07 check it (``warn_if_off_main_thread``).

    >>> off_main_thread()
    False
    """
    return threading.current_thread() is not threading.main_thread()


def warn_if_off_main_thread() -> bool:
    """Print, once per process, what running off the main thread changes and how to turn it off.

    The notebooks' widget callbacks call it first (``helpers.plotting.interact_quietly``). Returns
    whether this call printed the notice.

    >>> warn_if_off_main_thread()  # on the main thread: nothing to say
    False
    """
    if not off_main_thread() or _noticed.is_set():
        return False
    _noticed.set()
    print(_SUBSHELL_NOTICE, flush=True)
    return True


def kernel_subshells() -> list[str] | None:
    """The ids of this Jupyter kernel's subshells; None outside an ipykernel kernel.

    Empty where the kernel has none (ipykernel 6, or a front end that does not create them). The
    doctor's "Jupyter kernel" check reports them (notebook 00, your environment).

    >>> kernel_subshells() is None  # not a kernel here
    True
    """
    app = sys.modules.get("ipykernel.kernelapp")
    if app is None or not app.IPKernelApp.initialized():
        return None
    thread = getattr(app.IPKernelApp.instance().kernel, "shell_channel_thread", None)
    manager = getattr(thread, "manager", None)
    return manager.list_subshell() if manager is not None else []


# --- cgroup limits (the doctor's CPU-threads and memory checks): a container's real CPUs and memory ---


def _cpu_quota(
    cpu_max: str | None = None, quota_us: str | None = None, period_us: str | None = None
) -> float | None:
    """CPUs a cgroup quota allows: cgroup v2 ``cpu.max`` text, or v1 quota/period; None = no limit.

    cgroup v2's ``cpu.max`` holds ``"$MAX $PERIOD"`` with ``max`` for no limit; v1 has
    ``cpu.cfs_quota_us`` (-1 for no limit) and ``cpu.cfs_period_us``. Used by :func:`usable_cpus`.

    >>> _cpu_quota("200000 100000"), _cpu_quota("max 100000")
    (2.0, None)
    >>> _cpu_quota(quota_us="50000", period_us="100000")
    0.5
    """
    if cpu_max is not None:
        quota, _, period = cpu_max.strip().partition(" ")
        return None if quota == "max" else int(quota) / int(period or 100000)
    if quota_us is not None and int(quota_us) > 0:
        return int(quota_us) / int(period_us or 100000)
    return None


def cgroup_cpu_quota() -> float | None:
    """This process's tightest CPU quota in CPUs, cgroup v2 (walking up the hierarchy) or v1; None
    without one. :func:`usable_cpus` and the doctor's CPU-threads check read it.

    >>> quota = cgroup_cpu_quota()
    >>> quota is None or quota > 0
    True
    """
    root = Path("/sys/fs/cgroup")
    limits = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hierarchy, controllers, path = line.split(":", 2)
            if hierarchy == "0":  # cgroup v2: every level's cpu.max limits this one
                here = root / path.lstrip("/")
                while True:
                    with contextlib.suppress(OSError, ValueError):
                        limits.append(_cpu_quota((here / "cpu.max").read_text()))
                    if here == root:
                        break
                    here = here.parent
            elif "cpu" in controllers.split(","):  # cgroup v1
                for base in (root / controllers / path.lstrip("/"), root / controllers, root / "cpu"):
                    with contextlib.suppress(OSError, ValueError):
                        quota = (base / "cpu.cfs_quota_us").read_text()
                        limits.append(
                            _cpu_quota(quota_us=quota, period_us=(base / "cpu.cfs_period_us").read_text())
                        )
                        break
    limits = [limit for limit in limits if limit is not None]
    return min(limits) if limits else None


def _memory_limit(text: str) -> int | None:
    """A cgroup memory limit in bytes (v2 ``memory.max``, v1 ``memory.limit_in_bytes``); None for none.

    >>> _memory_limit("max"), _memory_limit("2147483648"), _memory_limit("9223372036854771712")
    (None, 2147483648, None)
    """
    text = text.strip()
    return int(text) if text.isdigit() and int(text) < 2**62 else None  # v1 writes ~2**63 for "none"


def cgroup_memory() -> tuple[int, int] | None:
    """(limit, usage) in bytes of this process's tightest cgroup memory limit, v2 or v1; None without
    one. The doctor's memory check reads it.

    >>> memory = cgroup_memory()
    >>> memory is None or min(memory) >= 0
    True
    """
    root, found = Path("/sys/fs/cgroup"), []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hierarchy, controllers, path = line.split(":", 2)
            if hierarchy == "0":  # cgroup v2: every level's memory.max limits this one
                here = root / path.lstrip("/")
                bases, files = (
                    [here, *(p for p in here.parents if p.is_relative_to(root))],
                    ("max", "current"),
                )
            elif "memory" in controllers.split(","):  # cgroup v1 (inside a container: its root)
                bases, files = (
                    [root / "memory" / path.lstrip("/"), root / "memory"],
                    ("limit_in_bytes", "usage_in_bytes"),
                )
            else:
                continue
            for base in bases:
                with contextlib.suppress(OSError, ValueError):
                    limit = _memory_limit((base / f"memory.{files[0]}").read_text())
                    if limit is not None:
                        found.append((limit, int((base / f"memory.{files[1]}").read_text())))
    return min(found, key=lambda pair: pair[0] - pair[1]) if found else None


def cuda_report(timeout: float = 60.0) -> dict:
    """CUDA devices as a fresh interpreter sees them (empty for a CPU-only torch build).

    Notebook 04 (and ``environment_report``).

    >>> isinstance(cuda_report()["cuda_devices"], list)
    True
    """
    import torch

    if torch.version.cuda is None:
        return {"cuda_devices": [], "cuda_runtime": None, "cuda_driver": None}
    done = subprocess.run(
        [sys.executable, "-c", _CUDA_PROBE], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        return {"cuda_devices": [], "cuda_runtime": torch.version.cuda, "cuda_error": done.stderr[-500:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _parallel_backend(info: str) -> str:
    match = re.search(r"ATen parallel backend: (.+)", info)
    return match.group(1).strip() if match else "unknown"


def _openmp_runtime() -> str:
    """Which OpenMP library torch loaded (GNU libgomp is the one that hangs after fork)."""
    try:
        maps = open(f"/proc/{os.getpid()}/maps").read()
    except OSError:
        return "unknown (no /proc)"
    for name, label in (("libgomp", "GNU libgomp"), ("libiomp", "Intel libiomp"), ("libomp", "LLVM libomp")):
        if name in maps:
            return label
    return "none loaded"


def usable_cpus() -> int:
    """CPUs this process may really use: its affinity mask, capped by a cgroup CPU quota.
    Used by the doctor's CPU-threads check ([00 · Your environment](../notebooks/00_overview.ipynb#your-environment)) and by
    ``helpers.environment.environment_report``, whose ``usable_cpus`` line the set-up of notebooks 01 and 04
    prints.

    ``os.cpu_count()`` counts the machine's CPUs; a container limited to 2 CPUs on a 64-core
    host still reports 64 there (and torch picks its threads from the cores it sees).

    >>> 1 <= usable_cpus() <= os.cpu_count()
    True
    """
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(count, math.ceil(quota))) if quota else count


def environment_report(probe_cuda: bool = True) -> dict:
    """Python, torch and its thread runtime, CPUs, CUDA devices, start methods, sharing strategy.

    ``probe_cuda`` asks a separate interpreter about CUDA (only for CUDA builds of torch), so the
    calling process stays fork-safe.

    Notebooks 01, 04 and 05 print it in their set-up.

    >>> r = environment_report(probe_cuda=False)
    >>> sorted(r)[:3]
    ['cpu_count', 'cuda_devices', 'default_start_method']
    """
    import torch
    import torch.multiprocessing as tmp

    report = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_build": f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only",
        "parallel_backend": _parallel_backend(torch.__config__.parallel_info()),
        "openmp_runtime": _openmp_runtime(),
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cpus(),  # the affinity mask, capped by a container's CPU quota
        "default_start_method": default_start_method(),
        "start_methods": mp.get_all_start_methods(),
        "sharing_strategy": tmp.get_sharing_strategy(),
        "sharing_strategies": sorted(tmp.get_all_sharing_strategies()),
        "cuda_devices": [],
    }
    if probe_cuda:
        report.update(cuda_report())
    return report


def format_report(report: dict) -> str:
    """The report as aligned ``key: value`` lines, for printing in a notebook.

    >>> print(format_report({"python": "3.11.7", "torch": "2.13.0"}))
    python : 3.11.7
    torch  : 2.13.0
    """
    width = max(len(key) for key in report)
    lines = []
    for key, value in report.items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value)) or "none"
        lines.append(f"{key:<{width}} : {value}")
    return "\n".join(lines)
