"""The worker side of notebook 09: ``python -m helpers.multinode`` (:func:`main`), one worker under torchrun:
it reports what torchrun told it, may inject a fault, and trains."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

__all__: list[str] = []  # the public names are imported from helpers.multinode, which re-exports them

# What torchrun tells every worker, through its environment
# ([09 · One agent per node, one rendezvous](../notebooks/09_multi_node.ipynb#one-agent-per-node-one-rendezvous)).
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


# --- the worker side ------------------------------------------------------------------------------


def _report(report_dir: str) -> Callable[[], None]:
    """Write what torchrun told this worker to ``report_dir/rankR-pidP.json`` (its variables, pid,
    agent pid, start time); return a function that adds the time training finished.

    >>> _report("reports")  # in torchrun's workers (notebook 09)  # doctest: +SKIP
    """
    report = {name: os.environ.get(name) for name in _WORKER_ENV}
    report.update(pid=os.getpid(), agent_pid=os.getppid(), started=psutil.Process().create_time())
    path = Path(report_dir) / f"rank{os.environ['RANK']}-pid{os.getpid()}.json"
    _write_whole(path, report)
    return lambda: _write_whole(path, {**report, "finished": time.time()})


def _write_whole(path: Path, report: dict) -> None:
    """Write ``report`` to ``path`` so a reader polling the folder never sees half a file: write a
    name the reader's ``rank*-pid*.json`` glob skips, then rename it (atomic on one file system)."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(report))
    os.replace(partial, path)


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
    fault is armed. Used in
    [09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed).

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
    then notebook 06's :func:`helpers.ddp.train` through ``env://``, as under torchrun
    ([09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed)).

    >>> rank_with_torchrun_env(0, 1, "never-written.pt", port=29400)  # in mp.spawn's ranks  # doctest: +SKIP
    """
    from helpers.ddp import train

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size))
    os.environ.update(LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    train(rank, world_size, snapshot)  # no port: init_process_group reads the variables (env://)


def main(argv: list[str] | None = None) -> None:
    """``torchrun ... -m helpers.multinode --report-dir DIR --snapshot PATH [--epochs N]``: one worker
    of
    [09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed).
    It reports what torchrun told it, arms the fault the ``FAULT_*``
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
