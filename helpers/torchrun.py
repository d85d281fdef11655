"""Run a script or module under ``torchrun`` from a notebook or a test, bounded (notebooks 06 and 09).

``torchrun`` starts an agent (``torch.distributed.elastic``) that starts one process per rank and
tells each its rank in the environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``). :func:`run_torchrun` adds one thing to ``subprocess.run``: past the timeout it
kills the agent *and* its workers, which run in sessions of their own and would otherwise keep
running (and keep our output pipe open) after the agent is gone.

Example::

    >>> from helpers.torchrun import torchrun_command
    >>> torchrun_command(2, "-m", "helpers.ddp", "--snapshot", "s.pt")[1:6]
    ['-m', 'torch.distributed.run', '--standalone', '--nproc-per-node=2', '-m']
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

from helpers.processes import kill_tree

__all__ = ["torchrun_command", "run_torchrun"]


def torchrun_command(nproc: int, *script: str) -> list[str]:
    """``torchrun --standalone --nproc-per-node=nproc SCRIPT...`` for this interpreter.

    ``python -m torch.distributed.run`` is what the ``torchrun`` executable runs; ``--standalone``
    is one node with a rendezvous on a free local port. ``script``: a path or ``-m module``, then
    its arguments (notebook 06's appendix on snapshots, notebook 09).

    >>> torchrun_command(1, "train.py")[-2:]
    ['--nproc-per-node=1', 'train.py']
    """
    if nproc < 1:
        raise ValueError(f"nproc must be at least 1, got {nproc}")
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        *script,
    ]


def run_torchrun(
    command: Sequence[str], timeout: float = 120.0, cwd: str | None = None
) -> subprocess.CompletedProcess:
    """Run ``command`` (from :func:`torchrun_command`) with its output captured, bounded by ``timeout``.
    Notebook 06's appendix on snapshots restarts the training function under torchrun with it.

    Returns the ``CompletedProcess`` (``returncode``, ``stdout`` with stderr merged in), plain text:
    the command runs with ``PYTHON_COLORS=0`` and ``NO_COLOR=1`` (a Jupyter kernel sets
    ``FORCE_COLOR=1``, which colors argparse's errors on Python 3.14+). Past the timeout the agent
    and all its workers are killed and ``subprocess.TimeoutExpired`` is raised.
    Not run here: torchrun starts an agent and its ranks (seconds).

    >>> run_torchrun(torchrun_command(2, "-m", "helpers.ddp", "--snapshot", "s.pt"))  # doctest: +SKIP
    CompletedProcess(args=[...], returncode=0, stdout='...')
    """
    plain = {**os.environ, "PYTHON_COLORS": "0", "NO_COLOR": "1"}  # text to read, not a terminal
    proc = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd, env=plain
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except BaseException:
        # The workers hold our stdout pipe: kill_tree lists them through the agent before killing it.
        kill_tree(proc.pid, grace=10)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, output)
