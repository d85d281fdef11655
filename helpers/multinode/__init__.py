"""From one machine to many (notebook 09): torchrun agents as nodes on 127.0.0.1, what each worker
is told, a worker killed and the job restarted from its snapshot, a node lost.

Each ``torchrun`` process is one *agent*, the program that runs on every node of a cluster: the
agents meet at a rendezvous (``--rdzv-backend=c10d --rdzv-endpoint=HOST:PORT``), agree on the
world, start their workers with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``... in the environment, watch
them, and restart the whole group when one fails (``--max-restarts``). Notebook 09 starts two
agents on this machine, one worker each.

Parent side: :func:`agent_command` builds the command line of one agent, :func:`_agent_environment`
the environment agents on 127.0.0.1 need, :func:`torchrun_agents` runs a set of agents with a
deadline (on expiry every agent is killed with all its workers, which torchrun starts in sessions
of their own), :func:`store_host` says which agent hosts the rendezvous store, :func:`kill_node`
takes one node down. Worker side: ``python -m helpers.multinode`` runs :func:`main`: it writes what
torchrun told the worker to a JSON report, arms a fault when ``FAULT_*`` variables say so
(:func:`_arm_fault`), then runs notebook 06's :func:`helpers.ddp.train` (``env://``) under
torchelastic's ``record``. :func:`read_reports`, :func:`format_reports`, :func:`error_reports` and
:func:`plot_timeline` read the results back.

Example::

    >>> from helpers.multinode import agent_command
    >>> " ".join(agent_command(["-m", "helpers.multinode"], port=29400, run_id="demo", log_dir="logs")[3:7])
    '--nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:29400'
"""

from __future__ import annotations

from helpers.multinode.agents import Agent, agent_command, kill_node, store_host, torchrun_agents, wait_for
from helpers.multinode.reports import error_reports, format_reports, plot_timeline, read_reports
from helpers.multinode.worker import main, rank_with_torchrun_env

__all__ = [
    "agent_command",
    "Agent",
    "torchrun_agents",
    "store_host",
    "kill_node",
    "wait_for",
    "rank_with_torchrun_env",
    "read_reports",
    "format_reports",
    "error_reports",
    "plot_timeline",
    "main",
]
