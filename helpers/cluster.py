"""The same training on a cluster ([09 · On a cluster](../notebooks/09_multi_node.ipynb#on-a-cluster-slurm)): a Slurm batch script for N nodes x G
GPUs, and a way to run it on this machine under local stand-ins for ``srun`` and ``scontrol``.

:func:`slurm_script` writes the batch script: one Slurm task per node, each running one torchrun
agent, the first node of the allocation as the rendezvous endpoint, the job id as the rendezvous id.
``_run_batch_locally`` (what ``tests/test_cluster.py`` runs) plays ``sbatch`` for it on this
machine: it sets the ``SLURM_JOB_*`` variables and puts ``helpers/slurm_standin`` (small stand-ins,
*not* Slurm) first on ``PATH``, so the script's own lines (node list, endpoint, ``srun`` fanning out
one agent per node, the rendezvous) really run, with every "node" a process group on 127.0.0.1.

Example::

    >>> from helpers.cluster import slurm_script
    >>> print(slurm_script(nodes=4, gpus_per_node=8, entry=["train.py"]).splitlines()[2])
    #SBATCH --nodes=4
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from helpers.processes import kill_tree

__all__ = ["slurm_script"]

# Inside the package, so an installed helpers has them too (pyproject.toml lists them as package data).
_SLURM_STANDINS = Path(__file__).resolve().parent / "slurm_standin"

_TEMPLATE = """\
#!/bin/bash
#SBATCH --job-name={job_name}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1{gpu_line}
#SBATCH --cpus-per-task={cpus_per_task}
#SBATCH --time={time_limit}
#SBATCH --output=%x-%j.out
# One Slurm task per node runs one torchrun agent; each agent starts {nproc} worker(s) on its node.
set -euo pipefail
PYTHON=${{PYTHON:-python3}}

# The first node of the allocation hosts the rendezvous; every agent meets there.
nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))  # not `| head -n 1`: under pipefail,
head_node=${{nodes[0]}}                                      # head's early exit can fail the job
export RDZV_ENDPOINT="$head_node:{port}"
export NPROC_PER_NODE={nproc}
echo "job $SLURM_JOB_ID: $SLURM_JOB_NUM_NODES node(s) x $NPROC_PER_NODE worker(s)," \\
    "world $((SLURM_JOB_NUM_NODES * NPROC_PER_NODE)), rendezvous at $RDZV_ENDPOINT"

# --cpus-per-task again: since Slurm 22.05 srun does not inherit it from the batch script, and each
# node's agent and all its workers would share one CPU. --kill-on-bad-exit: one failed node stops the
# job. Each task announces its own node name (--local-addr), not socket.getfqdn(); the job id names
# the rendezvous, so two jobs never meet by mistake. --log-dir: error files and worker logs per job
# (without it, /tmp/torchelastic_* on every node).
srun --cpus-per-task="$SLURM_CPUS_PER_TASK" --kill-on-bad-exit=1 \\
    bash -c 'exec "$PYTHON" -m torch.distributed.run \\
    --nnodes="$SLURM_JOB_NUM_NODES" --nproc-per-node="$NPROC_PER_NODE" \\
    --rdzv-backend=c10d --rdzv-endpoint="$RDZV_ENDPOINT" --rdzv-id="$SLURM_JOB_ID" \\
    --local-addr="$SLURMD_NODENAME" --max-restarts={max_restarts} \\
    --log-dir="torchrun-logs/$SLURM_JOB_ID" "$@"' torchrun-agent \\
    {entry}
"""


def slurm_script(
    nodes: int,
    gpus_per_node: int,
    entry: Sequence[str],
    *,
    port: int = 29400,
    job_name: str = "ddp-digits",
    time_limit: str = "00:30:00",
    cpus_per_task: int = 8,
    max_restarts: int = 3,
) -> str:
    """A Slurm batch script that runs ``entry`` on ``nodes`` nodes x ``gpus_per_node`` GPUs.

    ``entry``: what each worker runs, as torchrun takes it (``["-m", "helpers.ddp", "--snapshot",
    PATH]`` or a script and its arguments); it is shell-quoted here. ``gpus_per_node=0``: a CPU job
    with one worker per node (no ``--gpus-per-node`` line). The snapshot path must be on storage
    every node sees. Used in [09 · On a cluster](../notebooks/09_multi_node.ipynb#on-a-cluster-slurm).

    >>> script = slurm_script(2, 4, ["-m", "helpers.ddp", "--snapshot", "/shared/run 1.pt"])
    >>> "#SBATCH --gpus-per-node=4" in script, "export NPROC_PER_NODE=4" in script
    (True, True)
    >>> script.rstrip().splitlines()[-1].strip()
    "-m helpers.ddp --snapshot '/shared/run 1.pt'"
    """
    if nodes < 1 or gpus_per_node < 0:
        raise ValueError(f"need nodes >= 1 and gpus_per_node >= 0, got {nodes} and {gpus_per_node}")
    return _TEMPLATE.format(
        job_name=job_name,
        nodes=nodes,
        gpu_line=f"\n#SBATCH --gpus-per-node={gpus_per_node}" if gpus_per_node else "",
        cpus_per_task=cpus_per_task,
        time_limit=time_limit,
        nproc=max(gpus_per_node, 1),
        port=port,
        max_restarts=max_restarts,
        entry=shlex.join(entry),
    )


def _run_batch_locally(
    script: str | os.PathLike,
    nodes: int,
    workdir: str | os.PathLike,
    timeout: float = 120.0,
    job_id: int = 4242,
) -> subprocess.CompletedProcess:
    """Run a batch script the way ``sbatch`` would start it, but here: the local stand-ins for
    ``srun``/``scontrol`` first on ``PATH``, ``nodes`` pretend nodes all named ``127.0.0.1``.

    Sets ``SLURM_JOB_ID``, ``SLURM_JOB_NAME``, ``SLURM_JOB_NODELIST``, ``SLURM_JOB_NUM_NODES``,
    ``SLURM_NNODES``, ``SLURM_CPUS_PER_TASK`` (from the script's ``#SBATCH --cpus-per-task=N`` line,
    as sbatch does; absent without one) and ``PYTHON`` (this interpreter). Output goes to the
    returned ``stdout``. Past ``timeout`` the script and everything it started (agents, workers)
    are killed and ``subprocess.TimeoutExpired`` is raised. Used in [09 · On a cluster](../notebooks/09_multi_node.ipynb#on-a-cluster-slurm).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     job = Path(folder) / "job.sh"
    ...     _ = job.write_text("srun bash -c 'echo node $SLURM_NODEID on $SLURMD_NODENAME' | sort")
    ...     print(_run_batch_locally(job, nodes=2, workdir=folder, timeout=30).stdout, end="")
    node 0 on 127.0.0.1
    node 1 on 127.0.0.1
    """
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(_SLURM_STANDINS), str(Path(sys.executable).parent), os.environ["PATH"]]),
        "PYTHON": sys.executable,
        "PYTHONUNBUFFERED": "1",
        "SLURM_JOB_ID": str(job_id),
        "SLURM_JOB_NAME": Path(script).stem,
        "SLURM_JOB_NODELIST": ",".join(["127.0.0.1"] * nodes),
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_NNODES": str(nodes),
    }
    cpus = re.search(r"^#SBATCH --cpus-per-task=(\d+)$", Path(script).read_text(), re.MULTILINE)
    if cpus:
        env["SLURM_CPUS_PER_TASK"] = cpus[1]
    log = Path(workdir) / f"slurm-{job_id}.out"
    with open(log, "w") as sink:
        process = subprocess.Popen(
            ["bash", str(script)], stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
            cwd=workdir, env=env,
        )  # fmt: skip
    deadline = time.monotonic() + timeout
    try:
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        if process.poll() is None:  # deadline passed, or interrupted: the script and all it started
            kill_tree(process.pid, grace=5)
            raise subprocess.TimeoutExpired(process.args, timeout, output=log.read_text())
    return subprocess.CompletedProcess(process.args, process.returncode, stdout=log.read_text())
