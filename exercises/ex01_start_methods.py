"""Exercise 01 (start methods): a worker that runs under spawn and returns rank-specific results.

Write ``describe(rank, scale)``, to be run by ``helpers.launch.launch(describe, args=(scale,),
nprocs=2, method="spawn")``. It must return a dict with

- ``"rank"``: the rank it was given,
- ``"value"``: ``scale * (rank + 1)``,
- ``"pid"``: the id of the process it runs in (``os.getpid()``, called when it runs).

It must be a plain top-level ``def`` in this file: a spawn child re-imports it by module and name.

Check with::

    from helpers.checkers import check_ex01; check_ex01()
"""

from __future__ import annotations


def describe(rank: int, scale: int) -> dict:
    """Return ``{"rank": rank, "value": scale * (rank + 1), "pid": <this process's pid>}``."""
    raise NotImplementedError("exercise 01: write describe")
