"""helpers.ddp: rendezvous, the DDP equivalence proof, collectives, no_sync, checkpoint, failures,
torchrun. Each launch of ranks costs seconds (spawn children import torch), so one module-scoped
run serves most assertions."""

from __future__ import annotations

import socket
import time

import matplotlib
import pytest
import torch
import torch.multiprocessing as tmp

from helpers import ddp
from helpers.launch import spawn_with_deadline
from helpers.processes import live_children

matplotlib.use("Agg")
pytestmark = pytest.mark.timeout(600)  # a loaded 2-core machine needs tens of seconds per launch


@pytest.fixture(scope="module")
def lesson():
    return ddp.run_lesson(world_size=2, cache=False, timeout=400)


def test_free_port_is_bindable_and_port_in_use_sees_a_listener():
    port = ddp.free_port()
    assert not ddp.port_in_use(port)
    with socket.create_server(("127.0.0.1", port)):
        assert ddp.port_in_use(port)
        assert f"127.0.0.1:{port}" in ddp.listening_addresses()


def test_choose_backend_follows_the_gpu_count_without_initialising_cuda():
    expected = "nccl" if torch.cuda.device_count() >= 2 else "gloo"
    assert ddp.choose_backend(2) == expected
    assert ddp.choose_backend(10_000) == "gloo"
    assert not torch.cuda.is_initialized()
    with pytest.raises(ValueError, match="at least 1"):
        ddp.choose_backend(0)


def test_init_distributed_listens_on_loopback_only():
    import torch.distributed as dist

    port = ddp.free_port()
    ddp.init_distributed(0, 1, port, timeout=10)
    try:
        mine = [a for a in ddp.listening_addresses() if a.endswith(f":{port}")]
        assert mine == [f"127.0.0.1:{port}"]
    finally:
        dist.destroy_process_group()
    assert not ddp.port_in_use(port)


def test_data_and_model_are_deterministic():
    X, y, X_test, y_test = ddp.digits_data()
    assert X.shape == (1536, 64) and X_test.shape == (261, 64) and float(X.max()) <= 1.0
    a, b, c = ddp.make_model(0), ddp.make_model(0), ddp.make_model(1)
    assert ddp.max_param_difference(a.state_dict(), b.state_dict()) == 0.0
    assert ddp.max_param_difference(a.state_dict(), c.state_dict()) > 0.0


def test_single_process_training_learns_and_is_reproducible():
    first, second = ddp.train_single(64), ddp.train_single(64)
    assert ddp.max_param_difference(first["state"], second["state"]) == 0.0
    assert first["losses"][-1] < first["losses"][0] / 2
    assert len(first["losses"]) == ddp.CONFIG["epochs"] * ddp.CONFIG["n_train"] // 64


def test_max_param_difference_refuses_different_keys():
    with pytest.raises(ValueError, match="different parameters"):
        ddp.max_param_difference({"a": torch.zeros(1)}, {"b": torch.zeros(1)})


def test_two_ranks_with_batch_b_match_one_process_with_batch_2b(lesson):
    reference = ddp.train_single(2 * ddp.CONFIG["batch_size"])
    for rank in lesson["ranks"]:
        assert ddp.max_param_difference(rank["training"]["state"], reference["state"]) < 1e-5
    sums = [r["training"]["param_sum_after"] for r in lesson["ranks"]]
    assert sums[0] == sums[1]  # DDP's constructor broadcast rank 0's weights...
    assert lesson["ranks"][1]["training"]["param_sum_before"] != sums[1]  # ...over rank 1's own


def test_collectives_results(lesson):
    for rank in lesson["ranks"]:
        c = rank["collectives"]
        assert c["all_reduce"] == 3.0 and c["broadcast"] == 42.0 and c["all_gather"] == [0.0, 10.0]
    left = [r["collectives"]["barrier_left"] for r in lesson["ranks"]]
    arrived = [r["collectives"]["barrier_arrived"] for r in lesson["ranks"]]
    assert max(left) >= max(arrived)  # nobody left the barrier before the last one arrived


def test_no_sync_accumulates_the_same_gradient_with_fewer_allreduces(lesson):
    for rank in lesson["ranks"]:
        calls = rank["no_sync"]["allreduce_calls"]
        assert (
            calls["sync every micro-batch"]
            == rank["no_sync"]["micro_batches"] * calls["no_sync until the last"]
        )
        assert rank["no_sync"]["grad_difference"] < 1e-6


def test_checkpoint_progress_mistakes_and_loopback(lesson):
    for rank in lesson["ranks"]:
        assert rank["checkpoint"] == {"checkpoint_matches": True, "loaded_on": "cpu"}
        assert all(address.startswith("127.0.0.1:") for address in rank["listening"])
        if not torch.cuda.is_available():
            assert "device_ids" in rank["mistakes"]["DDP(model, device_ids=[rank])"]
            assert rank["mistakes"]["model.to(rank)"] != "no error"
    assert "100%" in lesson["ranks"][0]["progress"] and lesson["ranks"][1]["progress"] == ""
    assert not ddp.port_in_use(lesson["port"])


def test_a_failing_rank_raises_in_the_parent_and_the_others_are_cleaned_up():
    port = ddp.free_port()
    with pytest.raises(tmp.ProcessRaisedException, match="rank 1 failed on purpose"):
        spawn_with_deadline(ddp.fail_on_rank, args=(2, port, 1), nprocs=2, timeout=400)
    assert live_children() == []
    assert not ddp.port_in_use(port)


def test_a_missing_rank_fails_after_the_timeout_instead_of_hanging():
    with pytest.raises(tmp.ProcessRaisedException, match="(?i)timed out|timeout"):
        spawn_with_deadline(ddp.join_group, args=(2, ddp.free_port(), 3.0), nprocs=1, timeout=400)


def test_torchrun_script_reaches_the_same_parameters():
    run = ddp.run_torchrun(2, timeout=400)
    assert run["returncode"] == 0, run["output"][-2000:]
    assert run["env"]["WORLD_SIZE"] == "2" and run["env"]["RANK"] == "0"
    reference = ddp.train_single(2 * ddp.CONFIG["batch_size"])
    assert ddp.max_param_difference(run["state"], reference["state"]) < 1e-5
    assert run["output"].count("100%") >= 1  # rank 0's progress bar


def test_torchrun_command_names_a_loopback_endpoint():
    command = ddp.torchrun_command(2, 12345, "/tmp/out")
    assert "--rdzv-endpoint=127.0.0.1:12345" in command
    assert command[-4:] == ["--out", "/tmp/out", "--backend", ddp.CONFIG["backend"]]


def test_plot_world_size_widget_callback():
    summary = ddp.plot_world_size(1)
    assert summary["world_size"] == 1
    assert (
        summary["steps_per_rank"] == ddp.CONFIG["epochs"] * ddp.CONFIG["n_train"] // ddp.CONFIG["batch_size"]
    )
    with pytest.raises(ValueError, match="1, 2 or 3"):
        ddp.plot_world_size(4)


def _train_ddp_processes() -> list[str]:
    """Every process on the machine running scripts/train_ddp.py (torchrun's workers included)."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if str(ddp.SCRIPT) in cmdline:
            found.append(f"pid {process.info['pid']}: {cmdline[:160]}")
    return found


# 2 s: only the agent is up. 4 s: on a 2-core machine its workers have just started and wait on its
# store; when only the agent's process group was killed, they held our pipe for over 100 s.
@pytest.mark.parametrize("timeout", [2, 4])
def test_torchrun_past_its_timeout_is_killed_with_its_workers(timeout):
    import subprocess

    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        ddp.run_torchrun(2, timeout=timeout)
    # The workers run in sessions of their own: once orphaned they are no child of ours, so look
    # for them everywhere.
    assert _train_ddp_processes() == []
    assert live_children() == []
    assert time.monotonic() - start < timeout + 30
