"""Wrong answer to exercise 09: the node's worker count taken for the world size."""

from __future__ import annotations

from collections.abc import Mapping


def node_roles(env: Mapping[str, str]) -> dict:
    return {
        "rank": int(env["RANK"]),
        "world_size": int(env["LOCAL_WORLD_SIZE"]),
        "device": f"cuda:{env['LOCAL_RANK']}" if env.get("USE_GPUS") == "1" else "cpu",
        "writes_checkpoint": env["RANK"] == "0",
    }
