"""Reference solution to exercise 09."""

from __future__ import annotations

from collections.abc import Mapping


def node_roles(env: Mapping[str, str]) -> dict:
    """``{"rank": int, "world_size": int, "device": str, "writes_checkpoint": bool}`` for one worker."""
    rank = int(env["RANK"])  # global: unique in the job (LOCAL_RANK starts from 0 on every node)
    return {
        "rank": rank,
        "world_size": int(env["WORLD_SIZE"]),  # the whole job, not LOCAL_WORLD_SIZE (one node)
        "device": f"cuda:{env['LOCAL_RANK']}" if env.get("USE_GPUS") == "1" else "cpu",  # GPUs count per node
        "writes_checkpoint": rank == 0,  # LOCAL_RANK == 0 would be one writer per node
    }
