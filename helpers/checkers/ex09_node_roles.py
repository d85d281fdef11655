"""Exercise 09 (notebook 09): ``node_roles(env)`` on every node of several clusters.

:func:`check_ex09` first calls the learner's ``node_roles`` on made-up torchrun environments of
clusters with several nodes (fast, with a hint for each typical mistake), then, if those pass, runs
it inside two real torchrun agents on 127.0.0.1 (each worker runs ``python -m
helpers.checkers._ex09_worker``) and compares with what torchrun actually set.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from helpers.checkers.core import CheckResult, Incorrect, NotAttempted, Report, importable, run_check

__all__ = ["check_ex09"]

SECONDS = 20
"""About how long a passing check takes, in seconds, on an idle 2-core machine (from 5 s it says so)."""

# (nodes, workers per node, GPUs used): one node hides every mix-up; several nodes expose them.
_CLUSTERS = ((1, 4, True), (2, 1, False), (2, 4, True), (4, 8, True))


def _torchrun_environment(
    group_rank: int, local_rank: int, nodes: int, per_node: int, gpus: bool = True
) -> dict:
    """The variables torchrun gives worker ``local_rank`` of node ``group_rank`` (plus ``USE_GPUS``).

    >>> _torchrun_environment(0, 0, nodes=1, per_node=1, gpus=False)["USE_GPUS"]
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


def _expected_roles(env: dict) -> dict:
    """The right answer for one environment (the checker's reference).

    >>> _expected_roles(_torchrun_environment(1, 0, nodes=2, per_node=4))
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


def _made_up_clusters(node_roles: Callable[[dict], dict], report: Report) -> bool:
    """Call ``node_roles`` for every worker of every cluster in :data:`_CLUSTERS`; True if all right."""
    for nodes, per_node, gpus in _CLUSTERS:
        envs = [
            _torchrun_environment(node, local, nodes, per_node, gpus)
            for node in range(nodes)
            for local in range(per_node)
        ]
        try:
            answers = [node_roles(dict(env)) for env in envs]
        except NotImplementedError:
            raise NotAttempted from None
        except Exception as error:
            raise Incorrect(f"node_roles raised {type(error).__name__}: {error}") from None
        where = f"{nodes} node(s) x {per_node} worker(s){' with GPUs' if gpus else ''}"
        for env, answer in zip(envs, answers, strict=True):
            if not isinstance(answer, dict):
                raise Incorrect(f"node_roles returned {answer!r}: return a dict (see the docstring)")
            expected = _expected_roles(env)
            for key, hint in _HINTS.items():
                if answer.get(key) != expected[key]:
                    raise Incorrect(
                        f"{where}: worker RANK={env['RANK']} (node {env['GROUP_RANK']}, LOCAL_RANK="
                        f"{env['LOCAL_RANK']}) got {key}={answer.get(key)!r}, "
                        f"expected {expected[key]!r}: {hint}"
                    )
        writers = [
            env["RANK"] for env, answer in zip(envs, answers, strict=True) if answer.get("writes_checkpoint")
        ]
        if len(writers) != 1:
            raise Incorrect(
                f"{where}: {len(writers)} workers write the checkpoint (RANK {', '.join(writers) or '-'}); "
                "exactly one of the whole job must (RANK 0); LOCAL_RANK == 0 is one writer per node, "
                "all racing on the same file"
            )
        report.ok(f"{where}: every worker's rank, world size, device and writer role are right")
    return True


def _in_real_agents(module: str, timeout: float, report: Report) -> None:
    """Run ``node_roles`` inside two torchrun agents (one worker each); compare with torchrun's values."""
    from helpers.ddp import free_port
    from helpers.multinode import agent_command, torchrun_agents

    with tempfile.TemporaryDirectory(prefix="tmp-ex09-") as folder:
        entry = ["-m", "helpers.checkers._ex09_worker", "--module", module, "--out", folder]
        command = agent_command(
            entry, port=free_port(), run_id="ex09", join_timeout=60, log_dir=f"{folder}/logs"
        )
        try:
            with torchrun_agents([command, command], folder, timeout=timeout) as agents:
                pass
        except TimeoutError:
            raise Incorrect(
                f"two torchrun agents running node_roles did not finish within {timeout:g} s"
            ) from None
        if any(a.returncode != 0 for a in agents):
            errors = [
                line
                for line in agents[0].output.splitlines() + agents[1].output.splitlines()
                if "Error" in line
            ]
            last = errors[-1] if errors else "see the logs"
            raise Incorrect(f"node_roles failed inside torchrun's workers: {last}")
        results = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("worker*.json"))]
    if len(results) != 2:
        raise Incorrect(f"the two torchrun agents exited cleanly but {len(results)} of 2 workers reported")
    for result in results:
        if result["answer"] != _expected_roles(result["env"]):
            rank = result["env"]["RANK"]
            raise Incorrect(f"in a real torchrun worker with RANK={rank}: got {result['answer']}")
    report.ok(f"in two real torchrun agents: the {len(results)} workers' answers match torchrun's variables")


def check_ex09(
    module: str | os.PathLike = "helpers.exercises.ex09_node_roles", timeout: float = 120.0
) -> CheckResult:
    """Check exercise 09: ``node_roles(env)`` is right on every node of several clusters.

    Notebook 09, its closing programming exercise. Made-up environments of clusters with several
    nodes first (one hint per typical mistake), then two real torchrun agents on this machine.

    >>> check_ex09("tests.wrong_answers.ex09_writer_per_node").passed  # doctest: +ELLIPSIS
    checking .../tests/wrong_answers/ex09_writer_per_node.py (takes about 20 s) ...
    False
    >>> print(check_ex09().status)  # the untouched starter file
    not attempted yet
    """
    module = importable(module)  # a module name, or the path start_exercise returned

    def body(mod: ModuleType, report: Report) -> None:
        if _made_up_clusters(mod.node_roles, report):
            _in_real_agents(module, timeout, report)

    return run_check("ex09", module, ("node_roles",), body, SECONDS)
