"""helpers.ddp and helpers.torchrun: the training function of notebook 06 under mp.spawn and torchrun,
its snapshot and resume, the equivalence proof, failures; and minimal_train.

Each launch of ranks costs seconds (every rank imports torch), so one module-scoped run of ``train``
(what the notebook runs) serves several assertions, and the ranks come from a forkserver that has
imported torch once (``tests.workers.FRESH``)."""

from __future__ import annotations

import inspect
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from helpers import ddp
from helpers.digits import load_digits_split, make_model
from helpers.launch import spawn_with_deadline
from helpers.processes import live_children
from helpers.torchrun import run_torchrun, torchrun_command
from tests.workers import FRESH

pytestmark = pytest.mark.timeout(600)  # a loaded 2-core machine needs tens of seconds per launch

# These tests are about DDP, not the start method: their ranks are forked by the forkserver, which
# has imported torch and torch._dynamo (conftest.FORKSERVER_PRELOAD). Under spawn each rank imports
# them anew: about 2.7 CPU-seconds a rank on a 2-core machine. The ranks run the same code and reach
# the same weights, bit for bit: the script and module tests below launch with spawn and torchrun
# and compare against them. Notebook 06 shows mp.spawn.


def _launch(fn, args: tuple, nprocs: int) -> None:
    """``mp.spawn(fn, args, nprocs)``, with ranks started by :data:`FRESH`, bounded; a failed
    rank's traceback file, which torch leaves in the temporary directory, removed."""
    spawn_with_deadline(fn, args=args, nprocs=nprocs, method=FRESH, timeout=300)


def _train(snapshot: Path, epochs: int = ddp.EPOCHS, world_size: int = 2) -> dict:
    port = ddp.free_port()
    _launch(ddp.train, (world_size, str(snapshot), port, epochs), nprocs=world_size)
    assert not ddp.port_in_use(port)
    return torch.load(snapshot, weights_only=True)


def _tolerance(world_size: int) -> float:
    """DDP against the CPU reference: float32 rounding on CPU; GPU kernels (nccl path) round differently."""
    return 1e-4 if torch.cuda.device_count() >= world_size else 1e-5


def _assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs by {(a[key] - b[key]).abs().max():.1e}"


@pytest.fixture(scope="module")
def notebook_run(tmp_path_factory) -> dict:
    """What notebook 06 runs, mp.spawn(train, args=(2, snapshot, port), nprocs=2), its ranks started
    by :data:`FRESH`."""
    return _train(tmp_path_factory.mktemp("ddp") / "snapshot.pt")


def test_free_port_is_bindable_and_port_in_use_sees_a_listener():
    port = ddp.free_port()
    assert not ddp.port_in_use(port)
    with socket.create_server(("127.0.0.1", port)):
        assert ddp.port_in_use(port)
        assert f"127.0.0.1:{port}" in ddp.listening_addresses()


def test_train_snapshots_the_last_epoch_with_model_and_optimizer(notebook_run):
    assert sorted(notebook_run) == ["epoch", "model", "optimizer"]
    assert notebook_run["epoch"] == ddp.EPOCHS - 1
    assert notebook_run["model"].keys() == make_model().state_dict().keys()
    model = make_model()
    model.load_state_dict(notebook_run["model"])
    _, _, x_test, y_test = load_digits_split()
    from helpers.digits import accuracy

    assert accuracy(model, x_test, y_test) > 0.85


def test_two_ranks_with_batch_b_match_one_process_with_batch_2b(notebook_run):
    reference = ddp.train_single(2 * ddp.BATCH_SIZE)
    assert ddp.max_param_difference(notebook_run["model"], reference) < _tolerance(2)
    wrong_batch = ddp.train_single(ddp.BATCH_SIZE)  # the same samples, half the batch: far off
    assert ddp.max_param_difference(notebook_run["model"], wrong_batch) > 1e-2


def test_a_run_restarted_from_its_snapshot_ends_with_the_same_weights(notebook_run, tmp_path):
    snapshot = tmp_path / "snapshot.pt"
    assert _train(snapshot, epochs=1)["epoch"] == 0  # stopped after one epoch...
    resumed = _train(snapshot)  # ...and restarted unchanged: it continues from epoch 1
    assert resumed["epoch"] == ddp.EPOCHS - 1
    _assert_same_weights(resumed["model"], notebook_run["model"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot.pt"]  # no torn .tmp left


def test_a_finished_run_restarted_does_nothing(tmp_path):
    snapshot = tmp_path / "snapshot.pt"
    threads = torch.get_num_threads()
    try:
        ddp.train(0, 1, str(snapshot), port=ddp.free_port(), epochs=1)  # a world of one, in this process
        before = snapshot.stat().st_mtime_ns, snapshot.read_bytes()
        ddp.train(0, 1, str(snapshot), port=ddp.free_port(), epochs=1)
    finally:
        torch.set_num_threads(threads)  # train sets one thread on the CPU path
    assert (snapshot.stat().st_mtime_ns, snapshot.read_bytes()) == before


# The displayed source of train, retyped by a learner: the imports and constants it needs, the
# function exactly as notebook 06 shows it, and the usual entry point.
SCRIPT_HEAD = f"""\
import gc
import inspect
import os
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from helpers.digits import load_digits_split, make_model

EPOCHS, BATCH_SIZE, LR, SEED = {ddp.EPOCHS!r}, {ddp.BATCH_SIZE!r}, {ddp.LR!r}, {ddp.SEED!r}
TIMEOUT = timedelta(seconds={ddp.TIMEOUT.total_seconds()!r})


"""
SCRIPT_MAIN = """

if __name__ == "__main__":
    snapshot = sys.argv[1]
    if "RANK" in os.environ:  # started by torchrun
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), snapshot)
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(train, args=(2, snapshot, port), nprocs=2)
"""


def test_the_displayed_train_runs_as_a_script_under_torchrun_and_mp_spawn(
    notebook_run, tmp_path, monkeypatch
):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # torchrun's log folder (torchelastic_*), kept by torchrun
    script = tmp_path / "train_digits.py"
    script.write_text(
        SCRIPT_HEAD + inspect.getsource(ddp.rank_device) + "\n\n" + inspect.getsource(ddp.train) + SCRIPT_MAIN
    )
    under_torchrun = run_torchrun(torchrun_command(2, str(script), "torchrun.pt"), timeout=400, cwd=tmp_path)
    assert under_torchrun.returncode == 0, under_torchrun.stdout[-3000:]
    under_spawn = subprocess.run(
        [sys.executable, str(script), "spawn.pt"], cwd=tmp_path, capture_output=True, text=True, timeout=400
    )
    assert under_spawn.returncode == 0, under_spawn.stderr[-3000:]
    torchrun_state = torch.load(tmp_path / "torchrun.pt", weights_only=True)["model"]
    spawn_state = torch.load(tmp_path / "spawn.pt", weights_only=True)["model"]
    _assert_same_weights(torchrun_state, spawn_state)
    _assert_same_weights(torchrun_state, notebook_run["model"])


# `torchrun --standalone --nproc-per-node=2 -m helpers.ddp` is notebook 06's own check (its torchrun
# cell asserts mp.spawn's weights, bit for bit; make test runs it) and notebook 09's.
def test_the_module_spawns_its_ranks_itself_without_torchrun(notebook_run, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "helpers.ddp", "--snapshot", "snapshot.pt", "--nprocs", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    _assert_same_weights(
        torch.load(tmp_path / "snapshot.pt", weights_only=True)["model"], notebook_run["model"]
    )


def test_minimal_train_saves_what_train_ends_with(notebook_run, tmp_path):
    # notebook 06: minimal_train first, then train (snapshots, resume) gives the same weights, bit for bit
    path = tmp_path / "model.pt"
    _launch(ddp.minimal_train, (2, ddp.free_port(), str(path)), nprocs=2)
    _assert_same_weights(torch.load(path, weights_only=True), notebook_run["model"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]


def test_a_failing_rank_raises_in_the_parent_and_the_others_are_cleaned_up():
    port = ddp.free_port()
    with pytest.raises(mp.ProcessRaisedException, match="rank 1 failed on purpose"):
        _launch(ddp.fail_before_rendezvous, (2, port, 1), nprocs=2)
    assert live_children() == []
    assert not ddp.port_in_use(port)


def test_a_missing_rank_fails_after_the_timeout_instead_of_hanging():
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException, match="(?i)timed out|timeout"):
        _launch(ddp.join_group, (2, ddp.free_port(), 3.0), nprocs=1)
    assert time.monotonic() - start < 300


def test_max_param_difference_refuses_different_keys():
    with pytest.raises(ValueError, match="different parameters"):
        ddp.max_param_difference({"a": torch.zeros(1)}, {"b": torch.zeros(1)})


def test_torchrun_command_is_standalone_and_refuses_zero_ranks():
    command = torchrun_command(2, "-m", "helpers.ddp")
    assert command[:5] == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
    ]
    with pytest.raises(ValueError, match="at least 1"):
        torchrun_command(0, "x.py")


def _processes_running(marker: str) -> list[str]:
    """Every process on the machine whose command line contains ``marker`` (torchrun's workers run
    in sessions of their own: once orphaned they are no child of ours)."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if marker in cmdline:
            found.append(f"pid {process.info['pid']}: {cmdline[:160]}")
    return found


# 4 s: on a 2-core machine the workers have just started and wait on the agent's store; when only
# the agent's process group was killed, they held our pipe for over 100 s.
def test_torchrun_past_its_timeout_is_killed_with_its_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # torchrun's log folder (torchelastic_*), kept by torchrun
    marker = str(tmp_path / "never.pt")
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        command = torchrun_command(2, "-m", "helpers.ddp", "--snapshot", marker, "--epochs", "100000")
        run_torchrun(command, timeout=4)
    assert _processes_running(marker) == []
    assert live_children() == []
    assert time.monotonic() - start < 4 + 30


def test_torchrun_output_is_plain_text_in_a_kernel(monkeypatch):
    # ipykernel sets FORCE_COLOR=1; Python 3.14+'s argparse then wraps "error:" in escape codes,
    # and notebook 10's appendix F looks for "error: unrecognized arguments" in the output.
    monkeypatch.setenv("FORCE_COLOR", "1")
    code = "import argparse, sys; argparse.ArgumentParser().parse_args(sys.argv[1:])"
    done = run_torchrun([sys.executable, "-c", code, "--local-rank=0"], timeout=60)
    assert done.returncode == 2
    assert "error: unrecognized arguments: --local-rank=0" in done.stdout, done.stdout
    assert "\x1b[" not in done.stdout


def test_explore_world_size_is_the_widget_callback():
    import matplotlib

    matplotlib.use("Agg")
    summary = ddp.explore_world_size(1)
    assert summary["world_size"] == 1 and summary["steps_per_rank_and_epoch"] == 1536 // ddp.BATCH_SIZE
    assert summary["difference"] < _tolerance(1) and summary["wall_seconds"] > 0
    with pytest.raises(ValueError, match="1, 2 or 3"):
        ddp.explore_world_size(4)


def test_each_node_uses_nccl_when_it_has_a_gpu_for_each_of_its_own_ranks(monkeypatch):
    # Two torchrun nodes of 4 GPUs: 8 ranks in all, 4 on this node; the old rule (GPUs >= world
    # size) put them all on the CPU.
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert ddp.rank_device(7, 8) == torch.device("cuda:3")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "5")
    assert ddp.rank_device(7, 8) == torch.device("cpu")
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert ddp.rank_device(1, 4) == torch.device("cuda:1")  # mp.spawn on one machine
    assert ddp.rank_device(1, 8) == torch.device("cpu")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread names in /proc (Linux)")
def test_torch_distributed_nn_imported_after_the_group_holds_it_and_ddp_imports_it():
    assert ddp.gloo_threads_left(import_first=True) == []
    # If this fails, torch frees the group now: helpers.ddp's early import (and the patterns') can go.
    held = ddp.gloo_threads_left(import_first=False)  # the worker threads that have started so far
    assert "pt_gloo_runloop" in held and set(held) <= {"gloo_tcp_loop", "pt_gloo_runloop"}, held
    url = f"tcp://127.0.0.1:{ddp.free_port()}"
    first_ddp = (  # a process's first DDP(model) imports it (through torch._dynamo)
        "import sys, torch, torch.distributed as dist\n"
        f"dist.init_process_group('gloo', init_method={url!r}, rank=0, world_size=1)\n"
        "torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 1))\n"
        "print('torch.distributed.nn' in sys.modules)\n"
        "dist.destroy_process_group()\n"
    )
    done = subprocess.run([sys.executable, "-c", first_ddp], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["True"], done.stderr[-2000:]
