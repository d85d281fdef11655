"""Wrong answer to exercise 09: every node's first worker writes the checkpoint."""

from __future__ import annotations

from collections.abc import Mapping


def node_roles(env: Mapping[str, str]) -> dict:
    return {
        "rank": int(env["RANK"]),
        "world_size": int(env["WORLD_SIZE"]),
        "device": f"cuda:{env['LOCAL_RANK']}" if env.get("USE_GPUS") == "1" else "cpu",
        "writes_checkpoint": env["LOCAL_RANK"] == "0",
    }
