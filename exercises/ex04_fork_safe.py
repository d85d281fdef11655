"""Exercise 04 (fork and threads): a worker that is safe to fork from a busy parent.

Write ``fork_safe_sum(size)``: compute ``torch.randn(size, dtype=torch.float64).float().sum()`` and
return it as a Python float. It will run in a *fork* child whose parent has already run
multi-threaded torch ops (as a notebook kernel has). With GNU OpenMP, such a child hangs forever in
its first parallel op unless the worker makes itself safe first.

Check with::

    from helpers.checkers import check_ex04; check_ex04()
"""

from __future__ import annotations


def fork_safe_sum(size: int) -> float:
    """Return ``float(torch.randn(size, dtype=torch.float64).float().sum())``, safely in a fork child."""
    raise NotImplementedError("exercise 04: write fork_safe_sum")
