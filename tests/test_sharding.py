"""helpers.sharding (notebook 12): every method trains to DDP's weights, holds and moves the bytes the
notebook says, the sharded checkpoint loads into other world sizes; and scripts/bench_sharding.py.

One module-scoped launch of ``train_rank`` with every method serves most assertions; its ranks come
from a forkserver that has imported torch once (as tests/test_ddp.py). One case launches with spawn,
what the notebook's ``mp.spawn`` uses."""

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
import torch.multiprocessing as mp

from helpers import digits, sharding
from helpers.ddp import free_port, max_param_difference
from helpers.launch import spawn_with_deadline
from helpers.processes import live_children
from tests.workers import reload_fsdp2

pytestmark = pytest.mark.timeout(600)  # a loaded 2-core machine needs tens of seconds per launch

ROOT = Path(__file__).resolve().parent.parent
START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
HIDDEN = (32,)  # 2,410 parameters: every size divides by 2, so no padding in the byte counts
PARAMETERS = sum(p.numel() for p in digits.make_model(sharding.SEED, HIDDEN).parameters())
WORLD = 2


@pytest.fixture(scope="module")
def trained():
    """``train_rank`` with every method on 2 ranks: ``(folder, {method: [rank 0's, rank 1's results]})``."""
    with tempfile.TemporaryDirectory(prefix="tmp-test-sharding-") as folder:
        args = (WORLD, free_port(), folder, sharding.METHODS, HIDDEN, 4)
        spawn_with_deadline(sharding.train_rank, args=args, nprocs=WORLD, method=START_METHOD, timeout=300)
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
    assert ddp["parameters"] == ddp["gradients"] == 4 * PARAMETERS
    assert ddp["optimizer"] == 8 * PARAMETERS + 4 * 4  # two moments, a step counter per tensor
    assert zero1["optimizer"] == 8 * math.ceil(PARAMETERS / WORLD) + 4
    shares = [run["memory"]["optimizer"] for run in runs["zero_redundancy"]]
    assert sum(shares) == ddp["optimizer"] and shares[0] != shares[1]  # whole parameters: unequal shares
    for rank in range(WORLD):
        fsdp2 = runs["fsdp2"][rank]["memory"]
        assert fsdp2["parameters"] == fsdp2["gradients"] == 4 * PARAMETERS // WORLD
        assert fsdp2["optimizer"] == 8 * PARAMETERS // WORLD + 4 * 4


def test_the_bytes_moved_are_those_computed_from_the_collectives(trained):
    _, runs = trained
    for method in sharding.METHODS:
        for run in runs[method]:
            assert run["moved"] == sharding.expected_bytes(method, PARAMETERS, WORLD), method


def test_the_sharded_checkpoint_loads_into_one_process_and_into_three_ranks(trained, tmp_path):
    folder, runs = trained
    checkpoint = os.path.join(folder, "fsdp2-checkpoint")
    assert sorted(os.listdir(checkpoint)) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    model = sharding.load_sharded(digits.make_model(seed=1, hidden=HIDDEN), checkpoint)
    assert max_param_difference(model.state_dict(), runs["fsdp2"][0]["state"]) == 0.0
    path = str(tmp_path / "three.pt")
    args = (3, free_port(), checkpoint, HIDDEN, path)
    spawn_with_deadline(reload_fsdp2, args=args, nprocs=3, method=START_METHOD, timeout=300)
    three = torch.load(path, weights_only=True)
    assert max_param_difference(three["state"], runs["fsdp2"][0]["state"]) == 0.0
    assert sum(three["held"]) == PARAMETERS and max(three["held"]) < PARAMETERS / 2


def test_zero1_equals_ddp_with_padding_under_spawn_as_the_notebook_launches_it(tmp_path):
    hidden = (33,)  # 2,485 parameters: the last rank's slice is padded
    methods = ["ddp", "zero1"]
    mp.spawn(sharding.train_rank, args=(WORLD, free_port(), str(tmp_path), methods, hidden, 3), nprocs=WORLD)
    ddp, zero1 = (sharding.read_results(str(tmp_path), method, WORLD)[0] for method in methods)
    assert max_param_difference(ddp["state"], zero1["state"]) < 1e-6
    assert zero1["memory"]["optimizer"] == 8 * math.ceil(2485 / WORLD) + 4
    assert live_children() == []


def test_flat_shard_pads_the_last_slice_with_zeros():
    model = torch.nn.Linear(3, 2)  # 8 values: 3 slices of 3, the last one padded with 1 zero
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    shards = [sharding.flat_shard(model, rank, 3) for rank in range(3)]
    assert [s.numel() for s in shards] == [3, 3, 3]
    assert torch.equal(torch.cat(shards).detach(), torch.cat([flat, torch.zeros(1)]))
    assert shards[0].data_ptr() != model.weight.data_ptr()  # a copy


def test_collective_log_counts_an_all_reduce_in_a_world_of_one():
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        with sharding.CollectiveLog() as log:
            dist.all_reduce(torch.ones(10))
            dist.all_gather_into_tensor(torch.empty(4), torch.ones(4))
    finally:
        dist.destroy_process_group()
    assert log.calls == [("allreduce_", 40), ("_allgather_base_", 16)]
    assert log.bytes_received(world_size=1) == 0 and log.bytes_received(world_size=4) == (80 + 16) * 3 // 4


def test_the_benchmark_prints_one_row_per_method_and_size(tmp_path):
    command = [sys.executable, str(ROOT / "scripts" / "bench_sharding.py"), "--sizes", "16", "8,8",
               "--repeats", "2", "--steps", "2"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert "load average before" in lines[0] and "load average after" in lines[-1]
    header, *rows = lines[1:-1]
    assert header.split()[:3] == ["method", "params", "ms/step"]
    assert len(rows) == 2 * 4  # two sizes x DDP, DDP by hand, ZeRO-1, FSDP2
    assert [row.split()[0] for row in rows[:4]] == ["ddp", "ddp_by_hand", "zero1", "fsdp2"]
    assert all(len(row.split()) == len(header.split()) - 6 for row in rows)  # "MB x" headers are two words
    assert list(tmp_path.iterdir()) == []
