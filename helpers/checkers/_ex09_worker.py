"""What each torchrun worker of exercise 09's check runs (:mod:`helpers.checkers.ex09_node_roles`).

A module of its own, which the package does not import, so that ``python -m`` runs it once (runpy
warns about a module that its package's ``__init__`` has already imported).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    """What each torchrun worker of the check runs: the learner's ``node_roles`` on its real environment."""
    parser = argparse.ArgumentParser(prog="python -m helpers.checkers._ex09_worker")
    parser.add_argument("--module", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    env = {**os.environ, "USE_GPUS": "0"}  # the agents on this machine run CPU workers
    answer = importlib.import_module(args.module).node_roles(dict(env))
    chosen = {name: env[name] for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "USE_GPUS")}
    Path(args.out, f"worker{env['RANK']}.json").write_text(json.dumps({"env": chosen, "answer": answer}))


if __name__ == "__main__":
    main()
