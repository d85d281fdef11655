"""Exercise 01 (start methods): the parent side: start N processes, join them with a timeout.

Write ``run_workers(target, args, nprocs, method, timeout)``:

- make a context with ``torch.multiprocessing.get_context(method)`` (never ``set_start_method``);
- create ``nprocs`` processes; process ``rank`` runs ``target(rank, *args)``;
- start **all** of them before waiting for any;
- join each with ``join(timeout=timeout)``; a process still running after its join
  (``exitcode is None``) is stuck: ``terminate()`` it and join it again (with a timeout);
- return the exit codes, in rank order (0: returned; 1: raised; negative: killed by that signal).

The checker calls it with its own targets (they live in a module, so spawn children can import
them) and checks, in real processes, that each rank ran in a process of its own, at the same time
as the others, and that nothing is left running.

Check with::

    from helpers.checkers import check_ex01; check_ex01()
"""

from __future__ import annotations

from collections.abc import Callable

import torch.multiprocessing as mp  # noqa: F401  (you will need it)


def run_workers(
    target: Callable, args: tuple = (), nprocs: int = 2, method: str = "spawn", timeout: float = 30.0
) -> list[int | None]:
    """Run ``target(rank, *args)`` in ``nprocs`` processes of start method ``method``; return exit codes."""
    raise NotImplementedError("exercise 01: write run_workers")
