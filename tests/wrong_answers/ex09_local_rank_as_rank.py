"""Wrong answer to exercise 09: the local rank used as the global rank (right on one node only)."""

from __future__ import annotations

from collections.abc import Mapping


def node_roles(env: Mapping[str, str]) -> dict:
    rank = int(env["LOCAL_RANK"])
    return {
        "rank": rank,
        "world_size": int(env["WORLD_SIZE"]),
        "device": f"cuda:{env['LOCAL_RANK']}" if env.get("USE_GPUS") == "1" else "cpu",
        "writes_checkpoint": int(env["RANK"]) == 0,
    }
