"""Exercise 09 (multi-node): what a torchrun worker is, read from its environment.

Write ``node_roles(env)``. ``env`` is a worker's environment as torchrun sets it (strings:
``RANK``, ``LOCAL_RANK``, ``GROUP_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ...) plus
``USE_GPUS`` (``"1"`` or ``"0"``). Return a dict with:

- ``"rank"``: the global rank (an int): what ``DistributedSampler`` and ``init_process_group`` take
- ``"world_size"``: how many workers the whole job has (an int)
- ``"device"``: ``"cuda:N"``, this worker's GPU *on its node*, when ``USE_GPUS`` is ``"1"``; else
  ``"cpu"``
- ``"writes_checkpoint"``: ``True`` for exactly one worker of the whole job

On one node ``RANK`` equals ``LOCAL_RANK`` and ``WORLD_SIZE`` equals ``LOCAL_WORLD_SIZE``, so
mixing them up goes unnoticed there. The checker tries clusters of several nodes (made-up
environments), then runs your function in two real torchrun agents on this machine.

Check with::

    from helpers.checkers import check_ex09; check_ex09()
"""

from __future__ import annotations

from collections.abc import Mapping


def node_roles(env: Mapping[str, str]) -> dict:
    """``{"rank": int, "world_size": int, "device": str, "writes_checkpoint": bool}`` for one worker."""
    raise NotImplementedError("exercise 09: write node_roles")
