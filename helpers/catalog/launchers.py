"""Catalog entries: Launchers: mp.spawn, torchrun and the elastic agent, signals, exit codes, debuggers in workers.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

_FREE_PORT = """\
    with socket.socket() as s:  # a free port for this run
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
"""


def _elastic(
    worker: str, config: str = "", call: str = 'elastic_launch(config, sys.executable)("-c", WORKER)'
) -> str:
    """A script that runs WORKER (python source) under torchelastic's agent, one node, two workers."""
    return f'''\
import socket
import sys

from torch.distributed.launcher.api import LaunchConfig, elastic_launch

WORKER = """{worker}"""

if __name__ == "__main__":
{_FREE_PORT}
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=2, run_id="demo", max_restarts=0, monitor_interval=0.1,
        rdzv_backend="c10d", rdzv_endpoint=f"127.0.0.1:{{port}}",{config}
    )
    {call}
'''


ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="dataloader_timed_out",
        message="RuntimeError: DataLoader timed out after 1 seconds",
        cause=(
            "`DataLoader(..., num_workers>0, timeout=T)` waited more than T seconds for the next batch "
            "from its workers. A worker is stuck or slow in `Dataset.__getitem__` or the `collate_fn`: "
            "network or disk reads, a lock held across fork, or simply batches that take longer than T."
        ),
        fix=(
            "Find where the worker spends its time (`py-spy dump --pid WORKER_PID`, or "
            "`faulthandler.dump_traceback_later` in `worker_init_fn`); fix the stuck read, or raise "
            "`timeout` above the slowest batch (the default `timeout=0` waits forever)."
        ),
        sites=(
            "torch/utils/data/dataloader.py::_MultiProcessingDataLoaderIter._get_data::RuntimeError::dataloader-timed-out-after-_-seconds",
        ),
        reproduction="""\
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(3)  # a slow read: longer than the loader's timeout
        return torch.tensor(i)


if __name__ == "__main__":
    loader = DataLoader(Slow(), num_workers=1, timeout=1, multiprocessing_context="fork")
    for batch in loader:
        print(batch)
""",
        fixed="""\
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(0.2)
        return torch.tensor(i)


if __name__ == "__main__":
    # a timeout above the slowest batch
    loader = DataLoader(Slow(), num_workers=1, timeout=10, multiprocessing_context="fork")
    for batch in loader:
        print(batch)
""",
        teaches="07_dataloader_workers.ipynb#worker-options-persistent-workers-prefetch-factor-pin-memory-timeout",
        case="worker_raised",
    ),
    Entry(
        id="spawn_worker_raised",
        message="-- Process 1 terminated with the following error:",
        cause=(
            "A rank started by `mp.spawn` raised an exception. The parent's `join` re-raises it as "
            "`ProcessRaisedException`, with the rank's own traceback under this line. `mp.spawn` shows "
            "the first failure it saw, which may be an echo of another rank's (a rank that lost its "
            "peer fails in a collective)."
        ),
        fix=(
            "Read the rank's traceback under this line and fix that error; if it is a connection or "
            "collective error, look for a rank that failed earlier (run with "
            "`TORCH_DISTRIBUTED_DEBUG=DETAIL`, or log each rank's first exception)."
        ),
        pattern=r"-- Process \d+ terminated with the following error:",
        sites=(
            "torch/multiprocessing/spawn.py::ProcessContext.join::ProcessRaisedException::process-_-terminated-with-the-following-error-built-original",
        ),
        reproduction="""\
import torch.multiprocessing as mp


def work(rank):
    if rank == 1:
        raise ValueError("bad batch on rank 1")


if __name__ == "__main__":
    mp.start_processes(work, nprocs=2, start_method="fork")  # mp.spawn: the same, with spawn
""",
        fixed="""\
import torch.multiprocessing as mp


def work(rank):
    pass  # the rank's error fixed


if __name__ == "__main__":
    mp.start_processes(work, nprocs=2, start_method="fork")  # mp.spawn: the same, with spawn
""",
        teaches="06_ddp_mp_spawn.ipynb#when-a-rank-fails",
        case="worker_raised",
    ),
    Entry(
        id="oom_killed",
        message="torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
        cause=(
            "A rank died of SIGKILL (exit code -9), which no Python code can catch or report: almost "
            "always the kernel's out-of-memory killer, because the ranks together (each with its model, "
            "optimizer, DataLoader workers and pinned buffers) asked for more memory than the machine or "
            "the container's limit has. A scheduler or a person running `kill -9` looks the same."
        ),
        fix=(
            "Confirm with `dmesg -T | grep -i -e oom -e killed` (or the container's OOMKilled status); "
            "then use less host memory per rank: fewer ranks or DataLoader workers, a smaller batch, "
            "`mmap=True` loads, no copies of the dataset per worker. Raise the container's memory limit "
            "if the job needs it."
        ),
        sites=(
            "torch/multiprocessing/spawn.py::ProcessContext.join::ProcessExitedException::process-_-terminated-with-signal-_",
        ),
        reproduction="""\
import os
import signal

import torch.multiprocessing as mp


def work(rank):
    if rank == 0:
        os.kill(os.getpid(), signal.SIGKILL)  # what the out-of-memory killer sends


if __name__ == "__main__":
    mp.start_processes(work, nprocs=2, start_method="fork")  # mp.spawn: the same, with spawn
""",
        teaches="10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer",
        case="oom_killed",
    ),
    Entry(
        id="local_rank_argument",
        message="error: unrecognized arguments: --local-rank=0",
        pattern=r"error: unrecognized arguments:[^\n]*--local[-_]rank(?:=\d+)?",
        cause=(
            "`python -m torch.distributed.launch` (deprecated) appends `--local-rank=N` to each worker's "
            "command line (`--local_rank=N` before torch 2.0); a script whose argparse does not declare "
            "it exits with code 2, and the launcher reports the failed worker."
        ),
        fix=(
            "Launch with `torchrun` (`python -m torch.distributed.run`), which passes nothing and sets "
            '`LOCAL_RANK` in the environment: read `int(os.environ["LOCAL_RANK"])`. If you must keep '
            '`torch.distributed.launch`, add `parser.add_argument("--local-rank", "--local_rank", '
            "type=int)`."
        ),
        reproduction="""\
from pathlib import Path

import torch.distributed.launch as launch

TRAIN = \"\"\"
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
print("epochs", args.epochs)
\"\"\"

if __name__ == "__main__":
    Path("train.py").write_text(TRAIN)
    # python -m torch.distributed.launch --nproc-per-node=1 train.py
    launch.main(["--nproc-per-node=1", "--master-port=0", "train.py"])
""",
        fixed="""\
from pathlib import Path

import torch.distributed.run as torchrun

TRAIN = \"\"\"
import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
print("epochs", args.epochs, "local rank", int(os.environ["LOCAL_RANK"]))
\"\"\"

if __name__ == "__main__":
    Path("train.py").write_text(TRAIN)
    # torchrun --nproc-per-node=1 train.py
    torchrun.main(["--nproc-per-node=1", "--master-port=0", "train.py"])
""",
        teaches="10_field_guide.ipynb#appendix-f-unrecognized-arguments-local-rank-0",
        case="local_rank_argument",
    ),
    Entry(
        id="bdb_quit",
        message="bdb.BdbQuit",
        pattern=r"^(?:bdb\.)?BdbQuit\s*$",
        cause=(
            "`breakpoint()` (or `pdb.set_trace()`) ran in a child process: `multiprocessing` gives "
            "children `/dev/null` as standard input, so pdb reads end-of-file at its prompt, takes it "
            "as `quit`, and raises `BdbQuit` in the child (Python 3.10-3.13; 3.14 asks 'Quitting pdb "
            "will kill the process' instead)."
        ),
        fix=(
            "Debug one process: run the worker function directly in the main process (`work(0)` with a "
            "world of 1), or use `torch.distributed.breakpoint(rank=0)`, which opens pdb on the "
            "terminal for one rank and holds the others at a barrier; or attach a remote debugger "
            "(`debugpy`, `remote-pdb`) to the worker."
        ),
        reproduction="""\
import multiprocessing as mp


def work():
    x = 1
    breakpoint()  # a debugger in a child: its stdin is /dev/null
    print(x)


if __name__ == "__main__":
    p = mp.get_context("fork").Process(target=work)
    p.start()
    p.join(30)
""",
        teaches="14_field_guide_launches_and_ranks.ipynb#breakpoint-in-a-worker-bdb-bdbquit",
        case="debugger_in_worker",
    ),
    Entry(
        id="pdb_quit_prompt",
        message="Quitting pdb will kill the process. Quit anyway? [y/n]",
        cause=(
            "`breakpoint()` ran in a child process on Python 3.14 or later: pdb reads end-of-file from "
            "the child's `/dev/null` standard input, asks whether to quit, reads end-of-file again as "
            "yes and exits the process with code 1 (no `BdbQuit` as in 3.10-3.13)."
        ),
        fix=(
            "Debug one process (call the worker function in the main process), or use "
            "`torch.distributed.breakpoint(rank=0)`, or attach a remote debugger (`debugpy`) to the "
            "worker."
        ),
        read_from=(
            "CPython 3.14 Lib/pdb.py (Pdb.do_quit / do_EOF asking before quitting); this machine's "
            "Python 3.11 prints `bdb.BdbQuit` instead (entry bdb_quit)"
        ),
        versions="Python 3.14+",
        teaches="14_field_guide_launches_and_ranks.ipynb#breakpoint-in-a-worker-bdb-bdbquit",
        case="debugger_in_worker",
    ),
    Entry(
        id="signal_off_main_thread",
        message="ValueError: signal only works in main thread of the main interpreter",
        cause=(
            "`signal.signal(...)` was called from a thread other than the main one: a launcher (your "
            "own, a library's, or an older torch's) started from a `threading.Thread` (a web handler, "
            "a GUI, a job queue) installs its SIGTERM/SIGINT handler there. Python runs signal handlers "
            "on the main thread only, so it refuses (torch 2.15's `mp.spawn` installs none, and "
            "torchelastic checks the thread)."
        ),
        fix=(
            "Launch from the main thread (a script, a notebook cell) and put the server or GUI in "
            "threads instead; or install the handler once in the main thread before starting the "
            "launching thread."
        ),
        reproduction="""\
import signal
import threading

import torch.multiprocessing as mp


def work(rank):
    pass


def launch():
    signal.signal(signal.SIGTERM, lambda *args: None)  # a launcher's handler, off the main thread
    mp.start_processes(work, nprocs=2, start_method="fork")  # mp.spawn: the same, with spawn


if __name__ == "__main__":
    errors = []

    def run():
        try:
            launch()
        except ValueError as error:
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    raise errors[0]
""",
        fixed="""\
import signal

import torch.multiprocessing as mp


def work(rank):
    pass


def launch():
    signal.signal(signal.SIGTERM, lambda *args: None)
    mp.start_processes(work, nprocs=2, start_method="fork")  # mp.spawn: the same, with spawn


if __name__ == "__main__":
    launch()  # from the main thread
""",
        teaches="14_field_guide_launches_and_ranks.ipynb#a-launcher-started-off-the-main-thread",
        case="signal_off_main_thread",
    ),
    Entry(
        id="torchelastic_on_child_thread",
        message="Failed to register signal handlers since torchelastic is running on a child thread.",
        cause=(
            "torchelastic (torchrun, `elastic_launch`) was started off the main thread, where Python "
            "allows no signal handler, so it installs none. A SIGTERM or SIGINT sent to the launcher "
            "(a scheduler's stop, Ctrl-C) then does not reach its workers, which run in sessions of "
            "their own and are left behind as orphans."
        ),
        fix=(
            "Call `elastic_launch` / `torch.distributed.run.main` from the main thread; if the program "
            "must launch from a thread, stop the workers yourself (keep their pids, send SIGTERM) when "
            "it stops."
        ),
        sites=(
            "torch/distributed/elastic/multiprocessing/api.py::PContext.start::log.warning::failed-to-register-signal-handlers-since-torchelastic-is-run",
        ),
        reproduction=_elastic(
            "pass",
            call=(
                "import threading\n"
                '    thread = threading.Thread(target=elastic_launch(config, sys.executable), args=("-c", WORKER))\n'
                "    thread.start()  # the launcher in a thread\n"
                "    thread.join(60)"
            ),
        ),
        fixed=_elastic("pass"),
        teaches="14_field_guide_launches_and_ranks.ipynb#a-launcher-started-off-the-main-thread",
        case="signal_off_main_thread",
    ),
)
