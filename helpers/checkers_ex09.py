"""The automatic check of exercise 09 (notebook 09): ``node_roles(env)`` on several nodes.

Kept in its own module for now, built on the checker core's public :class:`CheckResult`; it moves
into the checkers package beside the others. :func:`check_ex09` first calls the learner's
``node_roles`` on made-up torchrun environments of clusters with several nodes (fast, with a hint
for each typical mistake), then, if those pass, runs it inside two real torchrun agents on
127.0.0.1 (``python -m helpers.checkers_ex09`` is what each worker runs) and compares with what
torchrun actually set. A starter file that still raises ``NotImplementedError`` gets "not
attempted yet"; nothing is left running.

Example::

    >>> from helpers.checkers_ex09 import torchrun_environment
    >>> env = torchrun_environment(group_rank=1, local_rank=2, nodes=2, per_node=4)
    >>> env["RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]
    ('6', '8', '4')
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from helpers.checkers import CheckResult

__all__ = ["CLUSTERS", "torchrun_environment", "expected_roles", "check_ex09", "main"]

# (nodes, workers per node, GPUs used): one node hides every mix-up; several nodes expose them.
CLUSTERS = ((1, 4, True), (2, 1, False), (2, 4, True), (4, 8, True))


def torchrun_environment(
    group_rank: int, local_rank: int, nodes: int, per_node: int, gpus: bool = True
) -> dict:
    """The variables torchrun gives worker ``local_rank`` of node ``group_rank`` (plus ``USE_GPUS``).

    >>> torchrun_environment(0, 0, nodes=1, per_node=1, gpus=False)["USE_GPUS"]
    '0'
    """
    return {
        "RANK": str(group_rank * per_node + local_rank),
        "LOCAL_RANK": str(local_rank),
        "GROUP_RANK": str(group_rank),
        "WORLD_SIZE": str(nodes * per_node),
        "LOCAL_WORLD_SIZE": str(per_node),
        "MASTER_ADDR": "node0.cluster",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_RUN_ID": "ex09",
        "USE_GPUS": "1" if gpus else "0",
    }


def expected_roles(env: dict) -> dict:
    """The right answer for one environment (the checker's reference).

    >>> expected_roles(torchrun_environment(1, 0, nodes=2, per_node=4))
    {'rank': 4, 'world_size': 8, 'device': 'cuda:0', 'writes_checkpoint': False}
    """
    return {
        "rank": int(env["RANK"]),
        "world_size": int(env["WORLD_SIZE"]),
        "device": f"cuda:{env['LOCAL_RANK']}" if env["USE_GPUS"] == "1" else "cpu",
        "writes_checkpoint": env["RANK"] == "0",
    }


_HINTS = {
    "rank": "the global rank is RANK; LOCAL_RANK starts again from 0 on every node, so two workers "
    "would claim the same rank",
    "world_size": "the world is WORLD_SIZE (all nodes); LOCAL_WORLD_SIZE counts one node's workers",
    "device": "pick the GPU with LOCAL_RANK (each node numbers its own GPUs from 0; cuda:RANK does not "
    "exist on the second node), and use 'cpu' when USE_GPUS is not '1'",
}


def _made_up_clusters(node_roles: Callable[[dict], dict], feedback: list[str]) -> bool:
    """Call ``node_roles`` for every worker of every cluster in :data:`CLUSTERS`; True if all right."""
    for nodes, per_node, gpus in CLUSTERS:
        envs = [
            torchrun_environment(node, local, nodes, per_node, gpus)
            for node in range(nodes)
            for local in range(per_node)
        ]
        answers = [node_roles(dict(env)) for env in envs]
        where = f"{nodes} node(s) x {per_node} worker(s){' with GPUs' if gpus else ''}"
        for env, answer in zip(envs, answers, strict=True):
            if not isinstance(answer, dict):
                feedback.append(f"node_roles returned {answer!r}: return a dict (see the docstring)")
                return False
            for key, hint in _HINTS.items():
                if answer.get(key) != expected_roles(env)[key]:
                    feedback.append(
                        f"{where}: worker RANK={env['RANK']} (node {env['GROUP_RANK']}, LOCAL_RANK="
                        f"{env['LOCAL_RANK']}) got {key}={answer.get(key)!r}, expected "
                        f"{expected_roles(env)[key]!r}: {hint}"
                    )
                    return False
        writers = [
            env["RANK"] for env, answer in zip(envs, answers, strict=True) if answer.get("writes_checkpoint")
        ]
        if len(writers) != 1:
            feedback.append(
                f"{where}: {len(writers)} workers write the checkpoint (RANK {', '.join(writers) or '-'}); "
                "exactly one of the whole job must (RANK 0); LOCAL_RANK == 0 is one writer per node, "
                "all racing on the same file"
            )
            return False
        feedback.append(f"{where}: every worker's rank, world size, device and writer role are right")
    return True


def _in_real_agents(module: str, timeout: float, feedback: list[str]) -> bool:
    """Run ``node_roles`` inside two torchrun agents (one worker each); compare with torchrun's values."""
    from helpers.ddp import free_port
    from helpers.multinode import agent_command, torchrun_agents

    with tempfile.TemporaryDirectory(prefix="tmp-ex09-") as folder:
        entry = ["-m", "helpers.checkers_ex09", "--module", module, "--out", folder]
        command = agent_command(
            entry, port=free_port(), run_id="ex09", join_timeout=60, log_dir=f"{folder}/logs"
        )
        try:
            with torchrun_agents([command, command], folder, timeout=timeout) as agents:
                pass
        except TimeoutError:
            feedback.append(f"two torchrun agents running node_roles did not finish within {timeout:g} s")
            return False
        if any(a.returncode != 0 for a in agents):
            tail = [
                line
                for line in agents[0].output.splitlines() + agents[1].output.splitlines()
                if "Error" in line
            ]
            feedback.append(
                f"node_roles failed inside torchrun's workers: {tail[-1] if tail else 'see the logs'}"
            )
            return False
        results = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("worker*.json"))]
    for result in results:
        if result["answer"] != expected_roles(result["env"]):
            feedback.append(
                f"in a real torchrun worker with RANK={result['env']['RANK']}: got {result['answer']}"
            )
            return False
    feedback.append(
        f"in two real torchrun agents: the {len(results)} workers' answers match torchrun's variables"
    )
    return True


def check_ex09(module: str = "exercises.ex09_node_roles", timeout: float = 120.0) -> CheckResult:
    """Check exercise 09: ``node_roles(env)`` is right on every node of several clusters.

    >>> check_ex09("tests.wrong_answers.ex09_writer_per_node").passed
    False
    >>> print(check_ex09().status)  # the untouched starter file
    not attempted yet
    """
    try:
        node_roles = importlib.reload(importlib.import_module(module)).node_roles
    except Exception as error:  # a syntax error, a bad import, a missing function in the learner's file
        return CheckResult(
            "ex09", False, [f"{module} does not import node_roles: {type(error).__name__}: {error}"]
        )
    feedback: list[str] = []
    try:
        if not _made_up_clusters(node_roles, feedback):
            return CheckResult("ex09", False, feedback[-1:])
    except NotImplementedError:
        path = module.replace(".", "/") + ".py"
        return CheckResult(
            "ex09", False, [f"not attempted yet: edit {path} and run the check again"], attempted=False
        )
    except Exception as error:
        return CheckResult("ex09", False, [f"node_roles raised {type(error).__name__}: {error}"])
    passed = _in_real_agents(module, timeout, feedback)
    return CheckResult("ex09", passed, feedback)


def main(argv: list[str] | None = None) -> None:
    """What each torchrun worker of the check runs: the learner's ``node_roles`` on its real environment.

    >>> main(["--module", "solutions.ex09_node_roles", "--out", "/tmp"])  # doctest: +SKIP
    """
    parser = argparse.ArgumentParser(prog="python -m helpers.checkers_ex09")
    parser.add_argument("--module", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    env = {**os.environ, "USE_GPUS": "0"}  # the agents on this machine run CPU workers
    answer = importlib.import_module(args.module).node_roles(dict(env))
    chosen = {name: env[name] for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "USE_GPUS")}
    Path(args.out, f"worker{env['RANK']}.json").write_text(json.dumps({"env": chosen, "answer": answer}))


if __name__ == "__main__":
    from helpers.checkers_ex09 import main as _main

    _main()
