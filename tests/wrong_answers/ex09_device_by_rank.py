"""Wrong answer to exercise 09: the GPU picked by the global rank (cuda:5 on a node with 4 GPUs)."""

from __future__ import annotations

from collections.abc import Mapping


def node_roles(env: Mapping[str, str]) -> dict:
    return {
        "rank": int(env["RANK"]),
        "world_size": int(env["WORLD_SIZE"]),
        "device": f"cuda:{env['RANK']}" if env.get("USE_GPUS") == "1" else "cpu",
        "writes_checkpoint": env["RANK"] == "0",
    }
