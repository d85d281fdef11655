"""helpers.sharding (notebook 12): every method trains to DDP's weights, holds the bytes the notebook
says (every tensor the process can reach, counted), sends the bytes measured on gloo, the sharded
checkpoint loads into other world sizes; and scripts/bench_sharding.py.

One module-scoped launch of ``train_rank`` with every method serves most assertions; its ranks come
from a forkserver that has imported torch once (``tests.workers.FRESH``, as tests/test_ddp.py);
notebook 12 launches the same ranks with ``mp.spawn`` in the browser run and on the macOS path."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from helpers import digits, sharding
from helpers.ddp import free_port, max_param_difference
from helpers.launch import spawn_with_deadline
from helpers.processes import live_children
from tests.workers import FRESH, in_place_collectives, reload_fsdp2

pytestmark = pytest.mark.timeout(600)  # a loaded 2-core machine needs tens of seconds per launch

ROOT = Path(__file__).resolve().parent.parent
HIDDEN = (32,)  # 2,410 parameters: every size divides by 2, so no padding in the byte counts
PARAMETERS = sum(p.numel() for p in digits.make_model(sharding.SEED, HIDDEN).parameters())
WORLD = 2


@pytest.fixture(scope="module")
def trained():
    """``train_rank`` with every method on 2 ranks: ``(folder, {method: [rank 0's, rank 1's results]})``."""
    with tempfile.TemporaryDirectory(prefix="tmp-test-sharding-") as folder:
        args = (WORLD, free_port(), folder, sharding.METHODS, HIDDEN, 4)
        spawn_with_deadline(sharding.train_rank, args=args, nprocs=WORLD, method=FRESH, timeout=300)
        yield folder, {m: sharding.read_results(folder, m, WORLD) for m in sharding.METHODS}
    assert live_children() == []


def test_every_method_ends_with_ddps_weights(trained):
    _, runs = trained
    for method in sharding.METHODS:
        assert max_param_difference(runs["ddp"][0]["state"], runs[method][0]["state"]) < 1e-6, method
        assert max_param_difference(runs[method][0]["state"], runs[method][1]["state"]) == 0.0, method


def test_the_bytes_each_rank_holds(trained):
    _, runs = trained
    ddp, zero1 = runs["ddp"][0]["memory"], runs["zero1"][0]["memory"]
    assert ddp["parameters"] == ddp["gradients"] == ddp["buckets"] == 4 * PARAMETERS  # buckets: a copy
    assert ddp["optimizer"] == 8 * PARAMETERS + 4 * 4  # two moments, a step counter per tensor
    assert zero1["parameters"] == zero1["gradients"] == 4 * PARAMETERS  # flat buffers, the model's views
    assert zero1["optimizer"] == 8 * math.ceil(PARAMETERS / WORLD) + 4
    assert zero1["buckets"] == 0 and _held(zero1) < _held(ddp) - 4 * PARAMETERS  # 4 + 4 + 8/W bytes
    shares = [run["memory"]["optimizer"] for run in runs["zero_redundancy"]]
    assert sum(shares) == ddp["optimizer"] and shares[0] != shares[1]  # whole parameters: unequal shares
    for rank in range(WORLD):
        fsdp2 = runs["fsdp2"][rank]["memory"]
        assert fsdp2["parameters"] == fsdp2["gradients"] == 4 * PARAMETERS // WORLD
        assert fsdp2["optimizer"] == 8 * PARAMETERS // WORLD + 4 * 4


def _held(memory: dict) -> int:
    return sum(memory[kind] for kind in ("parameters", "gradients", "optimizer", "buckets"))


def test_held_bytes_counts_every_tensor_the_rank_can_reach(trained):
    """A copy that held_bytes did not name (ZeRO-1's slice and its gradient, before the flat buffers)
    shows as reachable bytes beyond the count. FSDP2 keeps a few bytes of scalars besides."""
    _, runs = trained
    for method in sharding.METHODS:
        for run in runs[method]:
            # a missed copy shows as megabytes; a scalar at an address reused since `before`, as bytes
            assert abs(run["memory"]["reachable"] - _held(run["memory"])) <= 64, (method, run["memory"])


@pytest.mark.skipif(sharding.bytes_written() is None, reason="measured from /proc/self/io: Linux only")
def test_the_bytes_sent_are_measured_and_match_the_gloo_model(trained):
    _, runs = trained
    for method in sharding.METHODS:
        for rank, run in enumerate(runs[method]):
            sent = run["bytes"]
            # within 1% and 4 KB: gloo adds a few bytes to each message, many for this small model
            assert abs(sent["sent"] - sent["gloo"]) <= 0.01 * sent["gloo"] + 4096, (method, rank, sent)
            if method != "zero_redundancy":  # its broadcasts: root sends, the others receive
                for algorithm in ("ring", "gloo"):
                    assert sent[algorithm] == sharding.expected_bytes(method, PARAMETERS, WORLD, algorithm)
    for method in ("zero1", "fsdp2"):  # gloo's reduce-scatter is an all-reduce: the ring model is wrong here
        sent = runs[method][0]["bytes"]
        assert abs(sent["sent"] - sent["gloo"]) < abs(sent["sent"] - sent["ring"]), (method, sent)


def test_the_sharded_checkpoint_loads_into_one_process_and_into_three_ranks(trained, tmp_path):
    folder, runs = trained
    checkpoint = os.path.join(folder, "fsdp2-checkpoint")
    assert sorted(os.listdir(checkpoint)) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    model = sharding.load_sharded(digits.make_model(seed=1, hidden=HIDDEN), checkpoint)
    assert max_param_difference(model.state_dict(), runs["fsdp2"][0]["state"]) == 0.0
    path = str(tmp_path / "three.pt")
    args = (3, free_port(), checkpoint, HIDDEN, path)
    spawn_with_deadline(reload_fsdp2, args=args, nprocs=3, method=FRESH, timeout=300)
    three = torch.load(path, weights_only=True)
    assert max_param_difference(three["state"], runs["fsdp2"][0]["state"]) == 0.0
    assert sum(three["held"]) == PARAMETERS and max(three["held"]) < PARAMETERS / 2


def test_zero1_equals_ddp_with_padding(tmp_path):
    hidden = (33,)  # 2,485 parameters: the last rank's slice is padded
    methods = ["ddp", "zero1"]
    args = (WORLD, free_port(), str(tmp_path), methods, hidden, 3)
    spawn_with_deadline(sharding.train_rank, args=args, nprocs=WORLD, method=FRESH, timeout=300)
    ddp, zero1 = (sharding.read_results(str(tmp_path), method, WORLD)[0] for method in methods)
    assert max_param_difference(ddp["state"], zero1["state"]) < 1e-6
    assert zero1["memory"]["optimizer"] == 8 * math.ceil(2485 / WORLD) + 4
    assert live_children() == []


def test_flat_shard_pads_the_last_slice_with_zeros_and_copies_nothing():
    for rank in range(3):  # 8 values: 3 slices of 3, the last one padded with 1 zero
        model = torch.nn.Linear(3, 2)
        values = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        flat, flat_grad, shard = sharding.flat_shard(model, rank, 3)
        assert torch.equal(flat, torch.cat([values, torch.zeros(1)])) and torch.equal(
            flat_grad, torch.zeros(9)
        )
        assert torch.equal(shard.detach(), flat[3 * rank : 3 * rank + 3])
        assert shard.data_ptr() == flat[3 * rank :].data_ptr()  # a view, not a copy
        assert shard.grad.data_ptr() == flat_grad[3 * rank :].data_ptr()
        assert model.bias.data_ptr() == flat[6:].data_ptr()  # the model's parameters: views of flat
        assert model.bias.grad.data_ptr() == flat_grad[6:].data_ptr()


def test_the_collectives_zero1_runs_in_place_are_right_on_gloo(tmp_path):
    """reduce_scatter_tensor into a slice of its input, all_gather_into_tensor from a slice of its output
    (what zero1_step does), with different values on each rank."""
    path = str(tmp_path / "in_place.pt")
    spawn_with_deadline(in_place_collectives, args=(WORLD, free_port(), path), nprocs=WORLD,
                        method=FRESH, timeout=120)  # fmt: skip
    assert torch.load(path, weights_only=True) == [True, True]


def test_collective_log_counts_an_all_reduce_in_a_world_of_one():
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        with sharding.CollectiveLog() as log:
            dist.all_reduce(torch.ones(10))
            dist.all_gather_into_tensor(torch.empty(4), torch.ones(4))
            dist.broadcast(torch.ones(2), src=0)
    finally:
        dist.destroy_process_group()
    assert log.calls == [("allreduce_", 40, -1), ("_allgather_base_", 16, -1), ("broadcast_", 8, 0)]
    assert log.bytes_sent(world_size=1, rank=0) == 0
    assert log.bytes_sent(world_size=4, rank=0) == (80 + 16) * 3 // 4 + 8  # the root passes it on
    assert log.bytes_sent(world_size=4, rank=0, algorithm="gloo") == (80 + 16) * 3 // 4 + 3 * 8  # sends to 3
    assert log.bytes_sent(world_size=4, rank=3, algorithm="ring") == (80 + 16) * 3 // 4  # last in the ring


def test_the_benchmark_prints_one_row_per_method_and_size(tmp_path):
    command = [sys.executable, str(ROOT / "scripts" / "bench_sharding.py"), "--sizes", "16", "8,8",
               "--repeats", "1", "--steps", "2"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert "load average before" in lines[0] and "load average after" in lines[-1]
    header, *rows = lines[1:-1]
    assert header.split()[:3] == ["method", "params", "ms/step"]
    assert len(rows) == 2 * 4  # two sizes x DDP, DDP by hand, ZeRO-1, FSDP2
    assert [row.split()[0] for row in rows[:4]] == ["ddp", "ddp_by_hand", "zero1", "fsdp2"]
    assert all(len(row.split()) == 11 for row in rows), rows  # "MB x" headers are two or three words
    assert list(tmp_path.iterdir()) == []
