"""Elastic membership (notebook 09, an appendix): a job of 1 to 2 nodes grows when a node joins.

    python scripts/elastic_membership.py [--timeout 240]

Starts one torchrun agent with ``--nnodes=1:2`` on 127.0.0.1: the minimum (one node) is there, so
its worker starts training alone (world 1). Once the first snapshot exists, a second agent with the
same command joins; the first agent sees a node waiting at the rendezvous, stops its worker, and
both agents form a new round: world 2, both workers resume from the snapshot. When both workers of
that round have reported, the script takes both nodes down (the training itself is not the point)
and prints what every worker was told. Exit status 0 when a world-1 round was followed by a
world-2 round. Everything is bounded by ``--timeout``; nothing is left running.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from helpers import ddp, multinode


def _grown(report_dir: Path) -> bool:
    """True once both workers of a world-2 round have reported."""
    return sum(r["WORLD_SIZE"] == 2 for r in multinode.read_reports(report_dir)) == 2


def grow_from_one_node_to_two(timeout: float = 240.0) -> list[dict]:
    """Run the two agents as described above; return every worker report, in start order."""
    with tempfile.TemporaryDirectory(prefix="tmp-elastic-") as folder:
        work = Path(folder)
        for name in ("reports", "first", "second"):
            (work / name).mkdir()
        entry = ["-m", "helpers.multinode", "--report-dir", str(work / "reports")]
        entry += ["--snapshot", str(work / "elastic.pt"), "--epochs", "100000"]  # runs until we stop it
        command = multinode.agent_command(
            entry, port=ddp.free_port(), run_id="elastic", nnodes="1:2", join_timeout=60,
            last_call_timeout=1, log_dir=str(work / "logs"),
        )  # fmt: skip
        with multinode.torchrun_agents([command], work / "first", timeout=timeout) as first:
            multinode.wait_for(lambda: (work / "elastic.pt").exists(), timeout=timeout / 2, agents=first)
            with multinode.torchrun_agents([command], work / "second", timeout=timeout) as second:
                multinode.wait_for(
                    lambda: _grown(work / "reports"), timeout=timeout / 2, agents=first + second
                )
                for agent in first + second:  # grown: stop the job (its training is not the point)
                    multinode.kill_node(agent)
        return multinode.read_reports(work / "reports")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds for the whole run")
    args = parser.parse_args()
    reports = grow_from_one_node_to_two(args.timeout)
    print(multinode.format_reports(reports, ["RANK", "GROUP_RANK", "WORLD_SIZE", "MASTER_PORT", "pid"]))
    worlds = [r["WORLD_SIZE"] for r in reports]
    print("worlds, in start order:", worlds)
    sys.exit(0 if worlds[:1] == [1] and worlds[-2:] == [2, 2] else 1)


if __name__ == "__main__":
    main()
