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

import json
import multiprocessing as mp
import os
import platform
import re
import subprocess
import sys

__all__ = ["default_start_method", "environment_report", "format_report", "cuda_report"]

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

    from helpers.doctor import usable_cpus  # here: helpers.doctor imports this module

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
