"""Notebook 14's cases: each message of its rows of the error index produced here, through torch or
Python in a bounded child, and the behaviour its workers show (helpers.field_guide_launches)."""

from __future__ import annotations

import faulthandler
import logging
import logging.handlers
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading

import pytest
import torch.multiprocessing as mp

from helpers import field_guide_launches as fgl
from helpers.ddp import free_port
from helpers.field_guide import preload_ddp, stderr_of_children
from helpers.launch import spawn_with_deadline
from tests.error_messages import entry_for, matches

LINUX_FORK = sys.platform == "linux" and "fork" in mp.get_all_start_methods()
needs_fork = pytest.mark.skipif(not LINUX_FORK, reason="the ranks are forked (Linux)")
needs_posix = pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="SIGHUP and sessions are POSIX")

NAME_FROM_GUARD = """
import sys
import multiprocessing as mp

def work():
    print(args)

if __name__ == "__main__":
    args = sys.argv[1:]
    child = mp.get_context(sys.argv[1]).Process(target=work)
    child.start()
    child.join(timeout=60)
    sys.exit(child.exitcode)
"""


def _raised(fn, args, nprocs=2) -> str:
    """What the parent gets from ``fn`` in ``nprocs`` forked ranks (faulthandler off: a rank may abort)."""
    faulthandler.disable()
    try:
        spawn_with_deadline(fn, args=args, nprocs=nprocs, method="fork")
    except Exception as error:  # noqa: BLE001 (any exception is the message under test)
        return str(error)
    finally:
        faulthandler.enable()
    return "no error"


def test_breakpoint_in_a_spawn_child_quits_with_bdbquit():
    with stderr_of_children() as written:
        child = multiprocessing.get_context("spawn").Process(target=fgl.stop_at_breakpoint)
        child.start()
        child.join(timeout=60)
    assert child.exitcode == 1
    quits = "BdbQuit" if sys.version_info < (3, 14) else "Quit anyway?"  # 3.14: pdb asks, EOF is yes
    assert matches(written(), entry_for(quits).message), written()


def test_a_spawn_worker_logs_nothing_until_it_configures_logging():
    ctx = multiprocessing.get_context("spawn")
    for configure, expected in ((False, ([], "WARNING")), (True, (["StreamHandler"], "INFO"))):
        results = ctx.SimpleQueue()
        worker = ctx.Process(target=fgl.logging_in_worker, args=(results, configure))
        worker.start()
        worker.join(timeout=60)
        assert results.get()[1:] == expected


@pytest.fixture(scope="module")
def ddp_imported():
    preload_ddp()


def _first_step_gradients(case: str, option: str | None) -> dict[int, list[float]]:
    """Each of 2 forked ranks' weight gradient after one DDP step on its own input (rank -> first row)."""
    results = multiprocessing.get_context("fork").SimpleQueue()
    spawn_with_deadline(
        fgl.first_step_gradient, args=(2, free_port(), case, option, results), nprocs=2, method="fork"
    )
    return dict(results.get() for _ in range(2))


@needs_fork
def test_an_unused_parameter_fails_the_second_step_and_both_options_fix_it(ddp_imported):
    printed = _raised(fgl.train_two_steps, (2, free_port(), "unused head", None, 20))
    assert matches(printed, entry_for("your module has parameters that were not used").message), printed
    for option in ("find_unused_parameters", "static_graph"):
        assert _raised(fgl.train_two_steps, (2, free_port(), "unused head", option, 20)) == "no error"


@needs_fork
def test_one_step_with_an_unused_parameter_raises_nothing_and_averages_nothing(ddp_imported):
    mean = fgl.mean_gradient("unused head", 2)
    assert mean == [3.0] * 4  # ranks' inputs differ: their gradients [2, ...] and [4, ...]
    assert _first_step_gradients("unused head", None) == {0: [2.0] * 4, 1: [4.0] * 4}  # not averaged
    assert _first_step_gradients("unused head", "find_unused_parameters") == {0: mean, 1: mean}


@needs_fork
def test_a_layer_checkpointed_twice_is_marked_ready_twice_with_find_unused_parameters(ddp_imported):
    printed = _raised(
        fgl.train_two_steps, (2, free_port(), "checkpointed twice", "find_unused_parameters", 20)
    )
    assert matches(printed, entry_for("Expected to mark a variable ready only once").message), printed


@needs_fork
def test_a_layer_checkpointed_twice_runs_by_default_with_wrong_per_rank_gradients(ddp_imported):
    mean = fgl.mean_gradient("checkpointed twice", 2)
    wrong = _first_step_gradients("checkpointed twice", None)  # no error at all (torch 2.15.0)
    assert wrong[0] != wrong[1] and mean not in wrong.values(), (wrong, mean)
    assert _raised(fgl.train_two_steps, (2, free_port(), "checkpointed twice", None, 20)) == "no error"
    for case, option in (
        ("checkpointed twice", "static_graph"),
        ("checkpointed twice, use_reentrant=False", None),
    ):
        assert _first_step_gradients(case, option) == {0: mean, 1: mean}, (case, option)


def _model_with_a_branch_used_at_step_0():
    import torch

    class Branch(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.branch = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)

        def forward(self, x, step):
            return self.first(x) + (self.branch(x) if step == 0 else 0)

    return Branch()


def _branch_used_once(rank: int, world_size: int, port: int, option: str, timeout: float) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    url = f"tcp://127.0.0.1:{port}"
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world_size)
    try:
        model = DDP(_model_with_a_branch_used_at_step_0(), **{option: True})
        for step in range(3):
            model(fgl.rank_input(rank), step).sum().backward()
    finally:
        dist.destroy_process_group()


@needs_fork
def test_a_graph_that_changes_under_static_graph_has_its_own_row(ddp_imported):
    printed = _raised(_branch_used_once, (2, free_port(), "static_graph", 20))
    entry = entry_for("your training graph has changed")
    assert matches(printed, entry.message) and "static_graph" in entry.cause + entry.fix, printed
    assert _raised(_branch_used_once, (2, free_port(), "find_unused_parameters", 20)) == "no error"


def test_signal_handlers_only_on_the_main_thread():
    errors = []

    def install():
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        except ValueError as error:
            errors.append(f"ValueError: {error}")

    thread = threading.Thread(target=install)
    thread.start()
    thread.join(timeout=10)
    assert len(errors) == 1 and matches(errors[0], entry_for("signal only works in main thread").message)


def test_torchelastic_started_off_the_main_thread_registers_no_handlers(tmp_path):
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes

    caught = logging.handlers.BufferingHandler(capacity=100)
    log = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    log.addHandler(caught)

    def launch():
        job = start_processes(
            "job", sys.executable, {0: ("-c", "pass")}, {0: {}}, DefaultLogsSpecs(str(tmp_path))
        )
        job.wait(timeout=60)
        job.close()

    try:
        thread = threading.Thread(target=launch)
        thread.start()
        thread.join(timeout=90)
    finally:
        log.removeHandler(caught)
    said = " ".join(record.getMessage() for record in caught.buffer)
    assert matches(said, entry_for("Failed to register signal handlers").message), said


def test_torchrun_handles_sighup_on_the_main_thread_only():
    handled, check = fgl.torchrun_signals()
    assert "SIGHUP" in handled.split(",") and "main_thread()" in check


@pytest.mark.skipif("forkserver" not in mp.get_all_start_methods(), reason="no forkserver here")
def test_a_global_made_under_the_guard_is_missing_under_forkserver_not_fork(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(NAME_FROM_GUARD)
    runs = {
        method: subprocess.run(
            [sys.executable, str(script), method], capture_output=True, text=True, timeout=120
        )
        for method in ("fork", "forkserver")
    }
    assert runs["fork"].returncode == 0, runs["fork"].stderr
    assert runs["forkserver"].returncode == 1
    assert matches(runs["forkserver"].stderr, entry_for("NameError: name 'args'").message), runs[
        "forkserver"
    ].stderr


@pytest.mark.skipif(not LINUX_FORK, reason="needs fork")
def test_a_fork_context_lock_refused_by_a_spawn_child():
    lock = multiprocessing.get_context("fork").Lock()
    child = multiprocessing.get_context("spawn").Process(target=print, args=(lock,))
    with pytest.raises(RuntimeError) as refused:
        child.start()  # refused while pickling, before a process exists
    assert matches(f"RuntimeError: {refused.value}", entry_for("SemLock created in a fork context").message)


@needs_posix
@pytest.mark.parametrize(
    ("handle_hangup", "nohup", "expected"),
    [
        (False, False, (-signal.SIGHUP, True)),  # the default action: the launcher dies, the worker runs on
        (True, False, (128 + signal.SIGHUP, False)),  # SystemExit, finally: the worker stopped
        (True, True, (0, False)),  # nohup's SIG_IGN kept: both survive the hang-up, finish their work
    ],
)
def test_sighup_orphans_the_worker_unless_the_launcher_handles_it(handle_hangup, nohup, expected):
    with tempfile.TemporaryDirectory() as folder:
        code = (
            "from helpers.field_guide_launches import launcher; "
            f"launcher({folder!r}, {handle_hangup}, nohup={nohup}, seconds={5 if nohup else 60})"
        )
        job = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        try:
            launcher_pid, worker_pid = fgl.pids_written(folder)
            os.kill(launcher_pid, signal.SIGHUP)
            job.wait(timeout=90)
            orphan = fgl.still_running(worker_pid)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait(timeout=10)
            if "worker_pid" in locals() and fgl.still_running(worker_pid):
                os.kill(worker_pid, signal.SIGKILL)
    assert (job.returncode, orphan) == expected


@needs_posix
def test_the_pattern_keeps_the_sigign_nohup_started_it_with(tmp_path):
    from helpers.resources import pattern_path

    ignore_hangups = lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)  # noqa: E731 (as nohup starts it)
    runs = {
        nohup: subprocess.run(
            [sys.executable, str(pattern_path("14_hangup_safe_launcher.py")), "fork", "2", "hangup"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            preexec_fn=ignore_hangups if nohup else None,
        )
        for nohup in (False, True)
    }
    assert runs[False].returncode == 128 + signal.SIGHUP and "[-15, -15]" in runs[False].stdout
    assert runs[True].returncode == 0 and "[0, 0]" in runs[True].stdout, runs[True]
