"""Exercise 04 (fork and CUDA): a worker that is safe in a fork child, and a parent that keeps CUDA out.

Part 1, the worker side. Write ``fork_safe_sum(size)``: compute
``torch.randn(size, dtype=torch.float64).float().sum()`` and return it as a Python float. It will
run in a *fork* child whose parent has already run multi-threaded torch ops (as a notebook kernel
has). With GNU OpenMP, such a child hangs forever in its first parallel op unless the worker makes
itself safe first.

Part 2, the parent side (notebook 04's pattern). Write ``run_workers(n_workers)``: start
``n_workers`` processes that may use a GPU. Each worker (write it too, at the top level of this
file) chooses its own device, ``"cuda"`` if ``torch.cuda.is_available()`` else ``"cpu"``, computes
``torch.ones(1000, device=device).sum().item()`` and puts ``(rank, str(device), value)`` on a
Queue. The parent:

- never calls ``torch.cuda`` (not even ``is_available()``, neither in ``run_workers`` nor at the
  top of this file): on a machine with a GPU, that alone stops every later fork child from using CUDA;
- chooses a start method under which a child can use CUDA, with ``torch.multiprocessing.get_context``;
- reads the ``n_workers`` results (each ``get`` with a timeout) before it joins the workers (with a
  timeout), and returns them sorted by rank.

The checker runs part 1 in a fork child of a parent that has used its thread pool, and part 2 in
a process that records, in order, every ``torch.cuda`` call and every process start made there.

Check with::

    from helpers.checkers import check_ex04; check_ex04()
"""

from __future__ import annotations

import torch  # noqa: F401  (you will need it)
import torch.multiprocessing as mp  # noqa: F401  (you will need it)


def fork_safe_sum(size: int) -> float:
    """Return ``float(torch.randn(size, dtype=torch.float64).float().sum())``, safely in a fork child."""
    raise NotImplementedError("exercise 04 part 1: write fork_safe_sum")


def run_workers(n_workers: int = 2) -> list[tuple[int, str, float]]:
    """Start ``n_workers`` workers that pick their own device; return their ``(rank, device, value)``."""
    raise NotImplementedError("exercise 04 part 2: write run_workers (and its worker)")
