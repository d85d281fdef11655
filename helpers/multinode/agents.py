"""The parent side of notebook 09: torchrun agents as nodes on 127.0.0.1, run with a deadline, a node lost."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from helpers.processes import descendant_pids, kill_tree

if TYPE_CHECKING:
    pass

__all__: list[str] = []  # the public names are imported from helpers.multinode, which re-exports them

# --- the parent side: agents --------------------------------------------------------------------------


def agent_command(
    entry: Sequence[str],
    *,
    port: int,
    run_id: str,
    nnodes: str | int = 2,
    nproc_per_node: int = 1,
    max_restarts: int = 0,
    join_timeout: float = 30.0,
    last_call_timeout: float | None = None,
    log_dir: str,
) -> list[str]:
    """The command line of one torchrun agent (one node) whose rendezvous is 127.0.0.1:``port``.

    Every agent of a job gets the same command. ``entry``: what each worker runs, e.g.
    ``["-m", "helpers.multinode", "--report-dir", DIR]`` or a script path and its arguments.
    ``nnodes``: ``2``, or ``"1:2"`` for an elastic job (1 to 2 nodes). ``join_timeout``: how long
    the rendezvous waits for the other nodes before it fails (torchrun's default is 600 s).
    ``--local-addr`` tells the others where to reach this node; without it torchrun announces
    ``socket.getfqdn()``. ``last_call_timeout``: in an elastic job, how long the rendezvous waits
    for more nodes once the minimum is there (torchrun's default is 30 s). ``log_dir``: where
    torchrun keeps each worker's error file (required: without ``--log-dir`` torchrun makes a
    ``/tmp/torchelastic_*`` directory that nobody removes).
    Used by
    [09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed)
    and its appendices ([section 2](../notebooks/09_multi_node.ipynb#a-worker-and-the-command-line-of-each-node) writes
    the same command in a cell).

    >>> command = agent_command(["train.py"], port=29400, run_id="job", log_dir="logs")
    >>> command[:3] == [sys.executable, "-m", "torch.distributed.run"], command[-1]
    (True, 'train.py')
    >>> [a for a in command if a.startswith(("--rdzv-id", "--rdzv-conf", "--local-addr"))]
    ['--rdzv-id=job', '--rdzv-conf=join_timeout=30', '--local-addr=127.0.0.1']
    """
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",  # what the `torchrun` executable runs, with this interpreter
        f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        f"--rdzv-id={run_id}",
        f"--rdzv-conf=join_timeout={join_timeout:g}"
        + ("" if last_call_timeout is None else f",last_call_timeout={last_call_timeout:g}"),
        "--local-addr=127.0.0.1",
        f"--max-restarts={max_restarts}",
        f"--log-dir={log_dir}",
    ]
    return [*command, *entry]


def _loopback_interface() -> str | None:
    """The name of the interface that carries 127.0.0.1 (``lo`` on Linux, ``lo0`` on macOS)."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == "127.0.0.1" for a in addresses):
            return name
    return None


def _agent_environment(**extra: str) -> dict[str, str]:
    """This process's environment for agents on 127.0.0.1: gloo on the loopback interface, output
    unbuffered (the agent logs interleave in time order), a fresh worker store in every round
    (``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``, pytorch#135712), plus ``extra`` (e.g.
    ``FAULT_RANK="1"``).
    [09 · A worker, and the command line of each node](../notebooks/09_multi_node.ipynb#a-worker-and-the-command-line-of-each-node)
    sets the same variables in a cell, each with its reason.

    >>> env = _agent_environment(FAULT_RANK="1")
    >>> env["FAULT_RANK"], env["PYTHONUNBUFFERED"]
    ('1', '1')
    """
    # Workers meet at a store of their own, new in every round (the default reuses the agent's store
    # across restarts, and a restarted group can read the last round's keys: pytorch#135712).
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **extra}
    loopback = _loopback_interface()
    if loopback and "GLOO_SOCKET_IFNAME" not in env:
        env["GLOO_SOCKET_IFNAME"] = loopback  # else gloo uses the interface the hostname resolves to
    return env


@dataclass
class Agent:
    """One running (or finished) torchrun agent started by :func:`torchrun_agents`.

    [09 · A worker, and the command line of each node](../notebooks/09_multi_node.ipynb#a-worker-and-the-command-line-of-each-node)
    to
    [09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed):
    what :func:`torchrun_agents` yields, one per node.
    """

    command: list[str]
    process: subprocess.Popen
    log: Path  # the agent's stdout and stderr, and its workers' (they inherit them)
    launched: float  # time.time() at start
    ended: float | None = None  # time.time() when it was seen to exit
    timed_out: bool = False
    seen: dict[int, float] = field(default_factory=dict)  # pid -> create_time of its descendants

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    @property
    def seconds(self) -> float | None:
        """Wall time from start to exit (None while running)."""
        return None if self.ended is None else self.ended - self.launched

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def note_descendants(self) -> None:
        """Remember the agent's workers while it is alive: once it dies they are nobody's children.

        >>> agent = Agent(["x"], subprocess.Popen(["true"]), Path("x"), launched=0.0)
        >>> agent.process.wait(), agent.note_descendants(), agent.seen
        (0, None, {})
        """
        for pid in descendant_pids(self.pid):
            if pid not in self.seen:
                with contextlib.suppress(psutil.NoSuchProcess):
                    self.seen[pid] = psutil.Process(pid).create_time()


def _kill_remembered(agent: Agent) -> None:
    """SIGKILL every remembered worker that still runs (same pid *and* start time: not a reused pid)."""
    for pid, created in agent.seen.items():
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            if process.create_time() == created:
                process.kill()
                process.wait(5)


@contextlib.contextmanager
def torchrun_agents(
    commands: Sequence[Sequence[str]],
    workdir: str | os.PathLike,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> Iterator[list[Agent]]:
    """Start one agent per command; when the block ends, wait for them until ``timeout`` (counted
    from the start), then kill every agent that still runs together with all its workers.

    What it adds over ``subprocess.run(command, timeout=...)``: several agents at once, one
    deadline for all, and on expiry the *workers* die too (torchrun starts them in sessions of
    their own, so killing the agent or its process group leaves them running). An error or an
    interrupt in the block kills everything at once. Raises ``TimeoutError`` (with the agents'
    last output) when the deadline passed. Agent ``i`` logs to ``workdir/agent{i}.log``.
    Used in
    [09 · A worker, and the command line of each node](../notebooks/09_multi_node.ipynb#a-worker-and-the-command-line-of-each-node)
    to
    [09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with torchrun_agents([[sys.executable, "-c", "print('node up')"]], folder) as agents:
    ...         pass
    ...     agents[0].returncode, agents[0].output
    (0, 'node up\\n')
    """
    deadline = time.monotonic() + timeout
    agents: list[Agent] = []
    try:
        for index, command in enumerate(commands):
            log = Path(workdir) / f"agent{index}.log"
            with open(log, "w") as sink:  # the child keeps its own copy of the fd
                process = subprocess.Popen(
                    list(command),
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    cwd=workdir,
                    env=env if env is not None else _agent_environment(),
                )
            agents.append(Agent(list(command), process, log, launched=time.time()))
        yield agents
        _wait(agents, deadline)
    finally:
        for agent in agents:
            if agent.returncode is None:
                agent.timed_out = True
                kill_tree(agent.pid, grace=5)
                agent.ended = time.time()
            _kill_remembered(agent)  # workers of an agent that died before them
    late = [a for a in agents if a.timed_out]
    if late:
        tails = "\n".join(f"--- agent {agents.index(a)} (pid {a.pid}):\n{a.output[-1500:]}" for a in late)
        raise TimeoutError(f"{len(late)} agent(s) still ran after {timeout:g} s and were killed\n{tails}")


def _wait(agents: Sequence[Agent], deadline: float, interval: float = 0.05) -> None:
    """Poll until every agent has exited or the deadline passed, noting exit times and workers."""
    while time.monotonic() < deadline:
        running = [a for a in agents if a.ended is None]
        for agent in running:
            agent.note_descendants()
            if agent.process.poll() is not None:
                agent.ended = time.time()
        if all(a.ended is not None for a in agents):
            return
        time.sleep(interval)


def wait_for(
    condition: Callable[[], object], timeout: float, agents: Sequence[Agent] = (), interval: float = 0.02
) -> float:
    """Wait until ``condition()`` is true; return the seconds it took. Raises ``TimeoutError``.

    ``agents``: keep noting their workers while waiting (so :func:`torchrun_agents` can kill
    them even after their agent died). Notebook 09, appendix "A node lost".

    >>> wait_for(lambda: False, timeout=0.05)
    Traceback (most recent call last):
    ...
    TimeoutError: not true after 0.05 s: <lambda>
    """
    start = time.monotonic()
    while not condition():
        for agent in agents:
            agent.note_descendants()
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"not true after {timeout:g} s: {getattr(condition, '__name__', condition)}")
        time.sleep(interval)
    return time.monotonic() - start


def store_host(agents: Sequence[Agent], port: int) -> Agent | None:
    """The agent that hosts the rendezvous store: the one listening on ``port``. On a cluster that is
    the agent on the endpoint's host (only an agent whose hostname or address matches the endpoint
    tries to host); with every agent on 127.0.0.1, whichever binds the port first. The others
    connect to it. ``None`` when nobody listens (yet). Notebook 09, appendix "A node lost".

    >>> store_host([], 29400) is None
    True
    """
    for agent in agents:
        with contextlib.suppress(psutil.NoSuchProcess):
            connections = psutil.Process(agent.pid).net_connections(kind="inet")
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in connections):
                return agent
    return None


def kill_node(agent: Agent) -> list[int]:
    """Take a node down the way a lost machine goes: SIGKILL its agent and all its workers at once
    (listed before the first signal). Returns the pids killed. Notebook 09, appendix "A node lost".

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with torchrun_agents([[sys.executable, "-c", "import time; time.sleep(60)"]], folder) as agents:
    ...         killed = kill_node(agents[0])
    ...     killed == [agents[0].pid], agents[0].returncode
    (True, -9)
    """
    agent.note_descendants()
    try:
        family = [psutil.Process(agent.pid), *psutil.Process(agent.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    agent.process.wait(5)  # reaped through Popen, so its returncode says -9
    psutil.wait_procs(family[1:], timeout=5)
    return [process.pid for process in family]
