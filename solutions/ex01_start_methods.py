"""Reference solution to exercise 01: the parent side of the pattern of notebook 01."""

from __future__ import annotations

from collections.abc import Callable

import torch.multiprocessing as mp


def run_workers(
    target: Callable, args: tuple = (), nprocs: int = 2, method: str = "spawn", timeout: float = 30.0
) -> list[int | None]:
    """Run ``target(rank, *args)`` in ``nprocs`` processes of start method ``method``; return exit codes."""
    ctx = mp.get_context(method)
    procs = [ctx.Process(target=target, args=(rank, *args)) for rank in range(nprocs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=timeout)
        if p.exitcode is None:  # still running after the deadline: stuck
            p.terminate()
            p.join(timeout=5)
    return [p.exitcode for p in procs]
