"""Catalog entries: Launchers: mp.spawn, torchrun and the elastic agent, signals, exit codes, debuggers in workers.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

__all__ = ["ENTRIES"]  # helpers.catalog.entries() reads it

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


_EXIT_BARRIER = """\
import socket
import sys

import torch.multiprocessing as mp
from torch.distributed.elastic.agent.server.api import WorkerSpec
from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler


def node(port, is_host, seconds):
    # one node's torchrun agent, with one worker that runs for `seconds`
    params = RendezvousParameters(backend="c10d", endpoint=f"127.0.0.1:{{port}}", run_id="demo",
                                  min_nodes=2, max_nodes=2, join_timeout=30, is_host=is_host)
    spec = WorkerSpec(role="trainer", local_world_size=1, entrypoint=sys.executable,
                      args=("-c", f"import time; time.sleep({{seconds}})"),
                      rdzv_handler=get_rendezvous_handler(params), max_restarts=0, monitor_interval=0.1)
    agent = LocalElasticAgent(spec, logs_specs=DefaultLogsSpecs(), exit_barrier_timeout={timeout})
    agent.run()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the other node: its worker {note}
    other = mp.get_context("fork").Process(target=node, args=(port, True, 20))
    other.start()
    node(port, False, 0)  # this node's worker is done at once
    other.join(60)
"""


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
        rank=-2,  # the outermost wrapper: the rank's own error under it (even a generic one) is the cause
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
        pattern=r"^(?:bdb\.)?BdbQuit(?:: Caught BdbQuit in [^\n]*)?\s*$",
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
    Entry(
        id="elastic_worker_failed",
        message=("failed (exitcode: 1) local_rank: 0 (pid: 2407) of binary: /usr/bin/python3"),
        pattern=(
            r"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\) of (?:binary|fn): \S+"
            r"|ChildFailedError: *$"
            r"|Sending process \d+ closing signal SIG\w+"
            r"|Closing process \d+ via signal SIG\w+"
        ),
        cause=(
            "torchrun's agent (or `elastic_launch`) saw a worker exit with a non-zero code: it logs "
            "`failed (exitcode: N) local_rank: ...`, stops the other workers of the node (`Sending "
            "process N closing signal SIGTERM`, `Closing process N via signal SIGTERM`), and, with no "
            "restarts left, raises `ChildFailedError` with a summary whose 'Root Cause' is the first "
            "worker that failed. These lines are the launcher's summary, not the cause: the worker's "
            "own traceback or message is above them (exit code 1: a Python exception; 2: an argparse "
            "error; -9: SIGKILL, often the out-of-memory killer; -6: an abort in C++; -11: a segmentation "
            "fault in native code)."
        ),
        fix=(
            "Scroll up to the first worker error (the rank named under 'Root Cause') and fix that. To "
            "get each worker's traceback into the summary, decorate the worker's entry function with "
            "`@torch.distributed.elastic.multiprocessing.errors.record`; `--redirects=3 --tee=3` or "
            "`--log-dir` keeps each rank's output apart."
        ),
        sites=(
            "torch/distributed/elastic/multiprocessing/api.py::SubprocessContext._poll::log.error::failed-exitcode-_-local_rank-_-pid-_-of-binary-_",
            "torch/distributed/elastic/multiprocessing/api.py::MultiprocessContext._poll::log.exception::failed-exitcode-_-local_rank-_-pid-_-of-fn-_-start_method-_",
            "torch/distributed/launcher/api.py::launch_agent::ChildFailedError::-",
            "torch/distributed/elastic/multiprocessing/api.py::SubprocessContext._close::log.warning::sending-process-_-closing-signal-_",
            "torch/distributed/elastic/multiprocessing/api.py::MultiprocessContext._close::log.warning::closing-process-_-via-signal-_",
        ),
        reproduction=_elastic(
            """
import os, sys, time
if os.environ["LOCAL_RANK"] == "0":
    sys.exit(1)  # a worker that fails (its own error would be printed above)
time.sleep(30)
"""
        ),
        fixed=_elastic(
            """
import os
print("worker", os.environ["LOCAL_RANK"], "done")
"""
        ),
        rank=-1,
        teaches="09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed",
    ),
    Entry(
        id="worker_ignores_sigterm",
        message=("Unable to shutdown process 14086 via 15, forcefully exiting via 9"),
        pattern=(
            r"Unable to shutdown process \d+ via (?:Signals\.)?(?:SIG\w+|\d+), forcefully exiting via (?:Signals\.)?(?:SIG\w+|\d+)"
        ),
        cause=(
            "The agent stopped its workers (one failed, or the agent itself got a signal) by sending "
            "SIGTERM and waiting: 30 s after a worker failure (torch 2.15 does not apply "
            "`--shutdown-timeout` there), `--shutdown-timeout` / `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` (30 s "
            "by default) when the agent is stopped. A worker was still alive afterwards, so it sent "
            "SIGKILL. The worker ignores or handles SIGTERM without exiting, or is stuck in a C call (a "
            "collective, I/O) that does not return to Python."
        ),
        fix=(
            "Let SIGTERM end the worker: do not install `signal.SIG_IGN` for it, and if you handle it "
            "(to save a checkpoint), exit at the end of the handler (`sys.exit(...)`) and raise "
            "`torchrun --shutdown-timeout=SECONDS` when saving takes longer; give collectives a "
            "timeout (`init_process_group(timeout=...)`) so a stuck one returns."
        ),
        sites=(
            "torch/distributed/elastic/multiprocessing/api.py::SubprocessContext._close::log.warning::unable-to-shutdown-process-_-via-_-forcefully-exiting-via-_",
            "torch/distributed/elastic/multiprocessing/api.py::MultiprocessContext._close::log.warning::unable-to-shutdown-process-_-via-_-forcefully-exiting-via-_",
        ),
        reproduction=_elastic(
            """
import os, signal, time
if os.environ["LOCAL_RANK"] == "0":
    time.sleep(1)
    os.kill(os.getppid(), signal.SIGTERM)  # the launcher is stopped (a scheduler, Ctrl-C)
else:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a worker that ignores SIGTERM
time.sleep(30)
""",
            config=" shutdown_timeout=1,",
        ),
        fixed=_elastic(
            """
import os, signal, sys, time
if os.environ["LOCAL_RANK"] == "0":
    time.sleep(1)
    os.kill(os.getppid(), signal.SIGTERM)
else:
    signal.signal(signal.SIGTERM, lambda *args: sys.exit(143))  # handled, and then exits
time.sleep(30)
""",
            config=" shutdown_timeout=1,",
            call=(
                "from torch.distributed.elastic.multiprocessing.api import SignalException\n\n"
                "    try:\n"
                '        elastic_launch(config, sys.executable)("-c", WORKER)\n'
                "    except SignalException as stopped:\n"
                '        print("stopped by signal", stopped.sigval)'
            ),
        ),
        teaches="14_field_guide_launches_and_ranks.ipynb#the-terminal-closed-sighup-and-the-workers-left-behind",
    ),
    Entry(
        id="torchrun_got_signal",
        message=(
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 2412 got signal: 15"
        ),
        pattern=(
            r"SignalException: Process \d+ got signal: \d+"
            r"|Received (?:Signals\.)?\w+ death signal, shutting down workers"
            r"|Got termination signal: \S+"
        ),
        cause=(
            "torchrun's agent process itself received a signal (15 SIGTERM, 2 SIGINT, 1 SIGHUP, 3 "
            "SIGQUIT): a scheduler ending the job (time limit, preemption, `scancel`), Ctrl-C, a closed "
            "terminal, or a container runtime stopping. The agent stops its workers and raises "
            "`SignalException`; the workers did not fail."
        ),
        fix=(
            "Find who sent the signal: the scheduler's log (`sacct -j JOB`, `kubectl describe pod`), "
            "the time limit, an OOM of the whole container. Raise the time limit or checkpoint before "
            "it; run torchrun in `tmux` or under `setsid` when the terminal may close (not `nohup`: "
            "torchrun handles SIGHUP itself and stops its workers); with `--max-restarts` and a "
            "checkpoint, a resubmitted job resumes."
        ),
        sites=(
            "torch/distributed/elastic/multiprocessing/api.py::_terminate_process_handler::SignalException::process-_-got-signal-_",
            "torch/distributed/elastic/agent/server/api.py::SimpleElasticAgent.run::log.warning::received-_-death-signal-shutting-down-workers",
            "torch/distributed/elastic/agent/server/api.py::SimpleElasticAgent._exit_barrier::log.warning::got-termination-signal-_",
        ),
        reproduction=_elastic(
            """
import os, signal, time
if os.environ["LOCAL_RANK"] == "0":
    os.kill(os.getppid(), signal.SIGTERM)  # what a scheduler does to the launcher
time.sleep(30)
"""
        ),
        teaches="14_field_guide_launches_and_ranks.ipynb#the-terminal-closed-sighup-and-the-workers-left-behind",
    ),
    Entry(
        id="torchelastic_unknown_signal",
        message="Failed to register signal handler for SIGFOO",
        pattern=r"Failed to register signal handler for \w+",
        cause=(
            "torchrun's `--signals-to-handle` (`LaunchConfig.signals_to_handle`, handed to the agent as "
            "`TORCHELASTIC_SIGNALS_TO_HANDLE`; default `SIGTERM,SIGINT,SIGHUP,SIGQUIT`) names a signal "
            "this Python does not know (a typo, or a signal of another platform), so the agent installed "
            "no handler for it: on that signal the agent dies without stopping its workers."
        ),
        fix=(
            "Use names from Python's `signal` module, comma-separated: "
            "`torchrun --signals-to-handle=SIGTERM,SIGINT,SIGUSR1 ...`; or leave the default."
        ),
        sites=(
            "torch/distributed/elastic/multiprocessing/api.py::PContext.start::log.warning::failed-to-register-signal-handler-for-_",
            "torch/distributed/elastic/multiprocessing/api.py::PContext.start::log.warning::failed-to-register-signal-handler-for-_#2",
        ),
        reproduction=_elastic("pass", config=' signals_to_handle="SIGTERM,SIGFOO",  # a misspelt signal'),
        fixed=_elastic("pass", config=' signals_to_handle="SIGTERM,SIGINT",'),
    ),
    Entry(
        id="worker_d_state",
        message=(
            "[default] Worker pid=4242 stuck in uninterruptible sleep (D-state) for 600.0s (>= 600.0s); "
            "marking worker group UNHEALTHY and disabling restarts."
        ),
        pattern=(r"Worker pid=\d+ (?:stuck in|entered) uninterruptible sleep \(D-state\)"),
        cause=(
            "With `TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT` set, the agent watches its workers' "
            "Linux process state; a worker sat in uninterruptible sleep (`D` in `ps`): waiting in the "
            "kernel on a device or filesystem (a hung GPU driver call or NCCL collective, an NFS or "
            "FUSE mount that stopped answering). Such a process ignores every signal, SIGKILL too, so "
            "the agent marks the group UNHEALTHY and does not restart it."
        ),
        fix=(
            "Find what the worker waits on: `cat /proc/PID/stack` and `cat /proc/PID/wchan` (as root), "
            "`dmesg` for driver or NFS errors. Fix the mount or driver (often the node must be drained "
            "and rebooted); keep checkpoints and data on local disk when the network filesystem hangs."
        ),
        sites=(
            "torch/distributed/elastic/agent/server/local_elastic_agent.py::LocalElasticAgent._check_uninterruptible_state_timeout::log.error::_-worker-pid-_-stuck-in-uninterruptible-sleep-d-state-for-_s",
            "torch/distributed/elastic/agent/server/local_elastic_agent.py::LocalElasticAgent._update_uninterruptible_dwell::log.warning::_-worker-pid-_-entered-uninterruptible-sleep-d-state-will-ma",
        ),
        read_from=(
            "torch/distributed/elastic/agent/server/local_elastic_agent.py "
            "(_update_uninterruptible_dwell, _check_uninterruptible_state_timeout); a process in D "
            "state needs a hung device or filesystem"
        ),
    ),
    Entry(
        id="worker_group_unknown_state",
        message="Exception: [default] Worker group in UNKNOWN state",
        pattern=r"Exception: \[[^\]\n]*\] Worker group in \w+ state",
        cause=(
            "The agent's monitor returned a state it does not act on. In torch 2.15 that is UNKNOWN, "
            "returned when the worker pids the agent recorded differ from the processes it holds (logged "
            "just before as 'worker pids do not match process_context pids'): the workers were changed "
            "under the agent, e.g. a custom agent subclass or a second launcher in the same process."
        ),
        fix=(
            "Run one launcher per process with the stock `LocalElasticAgent` (torchrun); if you "
            "subclass the agent, keep `WorkerGroup.workers` and the process context in step when you "
            "start or restart workers."
        ),
        sites=(
            "torch/distributed/elastic/agent/server/api.py::SimpleElasticAgent._invoke_run::Exception::_-worker-group-in-_-state",
        ),
        read_from=(
            "torch/distributed/elastic/agent/server/api.py (SimpleElasticAgent._invoke_run) and "
            "local_elastic_agent.py (LocalElasticAgent._monitor_workers returns UNKNOWN on a pid mismatch)"
        ),
    ),
    Entry(
        id="exit_barrier_failed",
        message="Error waiting on exit barrier. Elapsed: 300.1 seconds",
        pattern=r"Error waiting on exit barrier\. Elapsed: [\d.]+ seconds",
        cause=(
            "When a node's workers have all finished, its torchrun agent waits (300 s by default) for "
            "the other nodes' agents at an exit barrier in the rendezvous store, so that the store's "
            "host does not leave while others still need it. They did not all arrive in time: another "
            "node's workers are still running (uneven work at the end), hang, or that node died. The "
            "traceback under it ends in `DistStoreError: wait timeout after 300000ms, keys: "
            "/torch.rendezvous.<run id>.0/torchelastic/agent/terminal_state/last_member`."
        ),
        fix=(
            "Look at the other nodes: a rank still training (uneven data at the end of an epoch: "
            "`DistributedSampler(drop_last=True)` or the `Join` context manager), a hang, or a crash. "
            "The barrier's length is `LocalElasticAgent(..., exit_barrier_timeout=...)`; torchrun and "
            "`LaunchConfig` have no option for it."
        ),
        sites=(
            "torch/distributed/elastic/agent/server/api.py::SimpleElasticAgent._exit_barrier::log.exception::error-waiting-on-exit-barrier-elapsed-_-seconds",
        ),
        reproduction=_EXIT_BARRIER.format(
            timeout="1",
            note="runs 20 s: longer than the exit barrier waits (it hosts the store: it outlives this node)",
        ),
        fixed=_EXIT_BARRIER.format(timeout="30", note="runs 20 s; the exit barrier now waits for it"),
        teaches="10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
    ),
)
