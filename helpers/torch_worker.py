"""A worker module as a real project has one: it imports torch at the top (notebook 01).

Notebook 01 starts :func:`work` from here, and measures how long a child takes to start when the
module of its function imports torch: a spawn child imports it again, a fork child inherits it.
(The other workers of notebook 01, in :mod:`helpers.start_methods`, need no torch and do not
import it, so their spawn children start fast.)
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

import torch

from helpers.processes import reap

__all__ = ["work", "METHOD_VARIANTS", "startup_latencies", "plot_startup"]

PRELOAD = ["torch", "helpers.torch_worker"]


def work(rank: int, size: int = 200) -> None:
    """A worker: one thread of torch work, then one line on stdout
    ([01 · Start processes](../notebooks/01_start_methods.ipynb#start-processes-start-join-timeout-exitcode)).

    Its result for the parent is its exit code: 0 when it returns.

    >>> work(0, size=2)  # doctest: +ELLIPSIS
    rank 0 (pid ...): ...
    """
    torch.set_num_threads(1)  # one thread per process: no oversubscription, no OpenMP pool to fork
    x = torch.randn(size, size)
    print(f"rank {rank} (pid {os.getpid()}): trace of x @ x = {float((x @ x).trace()):.1f}", flush=True)


METHOD_VARIANTS = ("fork", "spawn", "forkserver", "forkserver+preload")


def _note_start(index: int, sent_at: float, results) -> None:
    """Child side of :func:`startup_latencies`: the first line the child runs."""
    results.put((index, time.time() - sent_at))


def _latencies_here(method: str, nprocs: int, preload: bool, timeout: float) -> list[float]:
    ctx = mp.get_context(method)
    if preload:
        ctx.set_forkserver_preload(PRELOAD)
    results = ctx.Queue()
    procs = []
    try:
        for index in range(nprocs):
            # time.time(), not perf_counter: it is comparable across processes.
            proc = ctx.Process(target=_note_start, args=(index, time.time(), results))
            proc.start()
            procs.append(proc)
        latencies = dict(results.get(timeout=timeout) for _ in procs)
        return [latencies[index] for index in range(nprocs)]
    finally:
        reap(procs, timeout=timeout)


def startup_latencies(method: str, nprocs: int = 2, timeout: float = 120.0) -> list[float]:
    """Seconds from ``Process.start()`` to each child's first line, children started back to back.

    ``method`` is one of :data:`METHOD_VARIANTS`. Measured in this process, except
    ``"forkserver+preload"``: a process has a single forkserver, started on first use, and the
    preload list only counts when it starts; so that variant runs in a fresh interpreter that has
    imported torch, as a notebook kernel has.

    >>> len(startup_latencies("fork", nprocs=2)) if "fork" in mp.get_all_start_methods() else 2
    2
    """
    if method not in METHOD_VARIANTS:
        raise ValueError(f"method must be one of {METHOD_VARIANTS}, got {method!r}")
    if method != "forkserver+preload":
        return _latencies_here(method, nprocs, preload=False, timeout=timeout)
    code = (
        "import json, torch\n"
        "from helpers.torch_worker import _latencies_here\n"
        f"print(json.dumps(_latencies_here('forkserver', {int(nprocs)}, True, {float(timeout)})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the preload measurement failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def plot_startup(method: str = "fork", nprocs: int = 2) -> list[float]:
    """Widget callback (notebook 01, appendix on start-up time): measure, draw a bar per child; seconds.

    >>> len(plot_startup("spawn", nprocs=1))
    1
    """
    import matplotlib.pyplot as plt

    from helpers.plotting import METHOD_COLORS, bar_chart, new_figure

    latencies = startup_latencies(method, nprocs)
    fig, ax = new_figure(f"{method}: {nprocs} children started back to back", "child", "ms to first line")
    labels = [f"child {i}" for i in range(nprocs)]
    bar_chart(ax, labels, [s * 1e3 for s in latencies], fmt="{:.0f}", colors=[METHOD_COLORS[method]] * nprocs)
    plt.show()
    return latencies
