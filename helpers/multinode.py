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

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from helpers.processes import _descendant_pids, kill_tree

if TYPE_CHECKING:
    from matplotlib.axes import Axes

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

# What torchrun tells every worker, through its environment (notebook 09, section 1).
_WORKER_ENV = (
    "RANK",
    "LOCAL_RANK",
    "GROUP_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_RUN_ID",
)


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
    Used by notebook 09, section 3 and its appendices (section 2 writes the same command in a cell).

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
    ``FAULT_RANK="1"``). Notebook 09 section 2 sets the same variables in a cell, each with its reason.

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

    Notebook 09 sections 2-3: what :func:`torchrun_agents` yields, one per node.
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
        for pid in _descendant_pids(self.pid):
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
    Notebook 09, sections 2-3.

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

    >>> wait_for(lambda: True, timeout=1) < 1
    True
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


# --- the worker side ------------------------------------------------------------------------------


def _report(report_dir: str) -> Callable[[], None]:
    """Write what torchrun told this worker to ``report_dir/rankR-pidP.json`` (its variables, pid,
    agent pid, start time); return a function that adds the time training finished.

    >>> _report("reports")  # in torchrun's workers (notebook 09, section 3)  # doctest: +SKIP
    """
    report = {name: os.environ.get(name) for name in _WORKER_ENV}
    report.update(pid=os.getpid(), agent_pid=os.getppid(), started=psutil.Process().create_time())
    path = Path(report_dir) / f"rank{os.environ['RANK']}-pid{os.getpid()}.json"
    path.write_text(json.dumps(report))
    return lambda: path.write_text(json.dumps({**report, "finished": time.time()}))


class InjectedFault(RuntimeError):
    """The failure :func:`_arm_fault` raises in a worker when ``FAULT_KIND=raise``."""


def _raise_injected(signum: int, frame) -> None:
    raise InjectedFault(f"fault injected in rank {os.environ.get('RANK')} (FAULT_KIND=raise)")


def _arm_fault(snapshot: str) -> threading.Thread | None:
    """Fail this worker once the snapshot of epoch ``FAULT_AFTER_EPOCH`` exists, if ``FAULT_RANK``
    is its rank and the job starts from scratch (no snapshot yet), so a restarted group, which
    resumes from the snapshot, runs clean. ``FAULT_KIND=kill``: SIGKILL itself (a crash: no
    Python error, no error file); ``raise``: an :class:`InjectedFault` in the main thread
    (recorded in torchrun's error file).

    A watcher thread polls the snapshot (rank 0 writes it after each epoch, then all ranks meet at a
    barrier), so the fault strikes during the next epoch. Returns the thread, or ``None`` when no
    fault is armed. Notebook 09, section 3.

    >>> _arm_fault("/nonexistent/snapshot.pt") is None  # no FAULT_RANK in this environment
    True
    """
    fault_rank = os.environ.get("FAULT_RANK")
    if fault_rank is None or fault_rank != os.environ.get("RANK") or os.path.exists(snapshot):
        return None
    after_epoch = int(os.environ.get("FAULT_AFTER_EPOCH", "0"))
    kind = os.environ.get("FAULT_KIND", "kill")
    if kind == "raise":
        signal.signal(signal.SIGUSR1, _raise_injected)  # the handler runs in the main thread

    def watch() -> None:
        import torch

        while True:
            with contextlib.suppress(FileNotFoundError, RuntimeError, EOFError):  # absent or being replaced
                if torch.load(snapshot, weights_only=True)["epoch"] >= after_epoch:
                    break
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL if kind == "kill" else signal.SIGUSR1)

    thread = threading.Thread(target=watch, name="fault-injector", daemon=True)
    thread.start()
    return thread


def rank_with_torchrun_env(rank: int, world_size: int, snapshot: str, port: int) -> None:
    """One rank started by ``mp.spawn`` on this machine, given by hand the variables torchrun sets,
    then notebook 06's :func:`helpers.ddp.train` through ``env://``, as under torchrun (notebook 09,
    section 3).

    >>> rank_with_torchrun_env(0, 1, "never-written.pt", port=29400)  # in mp.spawn's ranks  # doctest: +SKIP
    """
    from helpers.ddp import train

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size))
    os.environ.update(LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    train(rank, world_size, snapshot)  # no port: init_process_group reads the variables (env://)


def main(argv: list[str] | None = None) -> None:
    """``torchrun ... -m helpers.multinode --report-dir DIR --snapshot PATH [--epochs N]``: one worker
    of notebook 09 section 3. It reports what torchrun told it, arms the fault the ``FAULT_*``
    variables ask for (:func:`_arm_fault`), and runs notebook 06's :func:`helpers.ddp.train`, which
    joins the group through ``env://``. torchelastic's ``record`` writes an exception to the error
    file the agent reads (``TORCHELASTIC_ERROR_FILE``).

    >>> main(["--report-dir", "/tmp", "--snapshot", "/tmp/x.pt"])  # doctest: +SKIP
    """
    from torch.distributed.elastic.multiprocessing.errors import record

    from helpers.ddp import train

    parser = argparse.ArgumentParser(prog="python -m helpers.multinode")
    parser.add_argument("--report-dir", required=True, help="each worker writes rankR-pidP.json here")
    parser.add_argument("--snapshot", required=True, help="resumed from if it exists")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(argv)
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])  # set by torchrun
    finished = _report(args.report_dir)  # what torchrun told this worker, as a JSON file
    _arm_fault(args.snapshot)  # does nothing unless FAULT_RANK names this rank
    record(train)(rank, world_size, args.snapshot, epochs=args.epochs)  # init_process_group: env://
    finished()


# --- reading the results back -------------------------------------------------------------------------


def read_reports(report_dir: str | os.PathLike) -> list[dict]:
    """Every worker report in ``report_dir``, in the order the workers started; numbers as ints.

    Notebook 09, section 3.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = (Path(folder) / "rank1-pid7.json").write_text('{"RANK": "1", "pid": 7}')
    ...     read_reports(folder)
    [{'RANK': 1, 'pid': 7}]
    """
    reports = []
    for path in Path(report_dir).glob("rank*-pid*.json"):
        report = json.loads(path.read_text())
        for name in _WORKER_ENV:
            value = report.get(name)
            if isinstance(value, str) and value.isdigit() and name != "TORCHELASTIC_RUN_ID":
                report[name] = int(value)
        reports.append(report)
    return sorted(reports, key=lambda r: (r.get("started", 0), r.get("RANK", 0)))


def format_reports(reports: Sequence[dict], columns: Sequence[str] = (*_WORKER_ENV, "pid")) -> str:
    """A text table with one row per worker report (notebook 09, section 3).

    >>> print(format_reports([{"RANK": 0, "pid": 42}], ["RANK", "pid"]))
    RANK  pid
       0   42
    """
    rows = [[str(r.get(c, "")) for c in columns] for r in reports]
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(columns)]
    lines = [
        "  ".join(f"{v:>{w}}" for v, w in zip(row, widths, strict=True)) for row in [list(columns), *rows]
    ]
    return "\n".join(lines)


def error_reports(log_dir: str | os.PathLike) -> list[dict]:
    """The error files that torchelastic's ``record`` wrote under ``log_dir`` (one per failed
    worker and attempt), each as ``{"path": ..., "message": ..., "traceback": ...}``.

    Notebook 09, appendix "No restarts left".

    >>> error_reports("/nonexistent")
    []
    """
    found = []
    for path in sorted(Path(log_dir).glob("*/attempt_*/*/error.json")):
        message = json.loads(path.read_text()).get("message", {})
        if isinstance(message, str):  # a worker that exited without an exception: text only
            message = {"message": message}
        extra = message.get("extraInfo", {})
        found.append(
            {
                "path": str(path.relative_to(log_dir)),
                "message": message.get("message", ""),
                "traceback": extra.get("py_callstack", ""),
            }
        )
    return found


def plot_timeline(reports: Sequence[dict], agents: Sequence[Agent], ax: Axes | None = None) -> Axes:
    """What each worker did when: its agent's rendezvous and start, then the worker itself.

    One row per worker, in start order, times relative to the first agent's launch; each agent's
    exit is a black tick on its workers' rows. A worker without ``finished`` was stopped (a failure,
    a restart): its hatched bar runs until its agent's next worker started, so it spans the failure
    and the new rendezvous too. Notebook 09, section 3.

    >>> import matplotlib.pyplot as plt
    >>> agent = Agent(["x"], subprocess.Popen(["true"]), Path("x"), launched=0.0, ended=3.0)
    >>> r = {"RANK": 0, "GROUP_RANK": 0, "TORCHELASTIC_RESTART_COUNT": 0, "agent_pid": agent.pid,
    ...      "started": 1.0, "finished": 2.5}
    >>> plot_timeline([r], [agent]).get_xlabel()
    's since the first agent started'
    >>> plt.close("all")
    """
    from matplotlib.patches import Patch

    from helpers.plotting import new_figure

    if ax is None:
        _, ax = new_figure("torchrun: what each worker did when", "s since the first agent started")
    origin = min(a.launched for a in agents)
    colors = {"agent: rendezvous, start the worker": "#bbbbbb", "worker: import, join, train": "#1b9e77"}

    def successor(report: dict) -> dict | None:  # the next worker its agent started
        later = [
            r for r in reports if r["agent_pid"] == report["agent_pid"] and r["started"] > report["started"]
        ]
        return min(later, key=lambda r: r["started"], default=None)

    ends = {id(r): r.get("finished") or (successor(r) or r)["started"] for r in reports}
    starts = {id(successor(r)): ends[id(r)] for r in reports if successor(r)}
    labels = []
    for row, report in enumerate(reports):
        agent = next((a for a in agents if a.pid == report.get("agent_pid")), None)
        waited = starts.get(id(report), agent.launched if agent else origin)
        ax.barh(row, report["started"] - waited, left=waited - origin, color="#bbbbbb")
        ax.barh(
            row,
            ends[id(report)] - report["started"],
            left=report["started"] - origin,
            color="#1b9e77",
            hatch=None if "finished" in report else "//",
        )
        if agent and agent.ended is not None:
            ax.plot([agent.ended - origin] * 2, [row - 0.4, row + 0.4], color="black")
        labels.append(
            f"node {report.get('GROUP_RANK')} rank {report.get('RANK')} "
            f"(restart count {report.get('TORCHELASTIC_RESTART_COUNT')})"
        )
    ax.set_yticks(range(len(reports)), labels)
    ax.invert_yaxis()
    legend = [Patch(color=color, label=name) for name, color in colors.items()]
    legend.append(Patch(facecolor="#1b9e77", hatch="//", label="stopped, then a new rendezvous"))
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return ax


if __name__ == "__main__":
    # Re-import, so that the functions the workers run are helpers.multinode's, not __main__'s.
    from helpers.multinode import main as _main

    _main()
