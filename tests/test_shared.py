"""helpers.shared_tensors: the workers and probes behind notebook 02, under every start method."""

from __future__ import annotations

import os
import sys

import matplotlib
import pytest
import torch
import torch.multiprocessing as tmp

import helpers.shared_tensors as sh
from helpers.launch import FAST_METHOD, launch
from tests.workers import METHODS

# Spawn children import torch (seconds each on a busy machine): the less central tests run under
# this platform's fast method and spawn only; the central ones under every method.
FAST_AND_SPAWN = sorted({FAST_METHOD, "spawn"})

matplotlib.use("Agg")
LINUX = sys.platform.startswith("linux")


@pytest.mark.skipif(not LINUX, reason="/proc/self/maps is Linux-only")
def test_memory_region_moves_to_dev_shm_on_share():
    t = torch.zeros(1_000_000)
    assert not sh.memory_region(t).startswith("/dev/shm")
    t.share_memory_()
    assert sh.memory_region(t).startswith("/dev/shm/torch_")


@pytest.mark.spawn_in_notebook("02", "add_in_place", "add_plus_equals", "add_and_rebind")
@pytest.mark.parametrize("method", METHODS)
def test_in_place_writes_reach_the_parent_and_rebinding_does_not(method):
    seen = {}
    for worker in (sh.add_in_place, sh.add_plus_equals, sh.add_and_rebind):
        t = torch.zeros(3).share_memory_()
        launch(worker, args=(t,), method=method)
        seen[worker.__name__] = t.tolist()
    assert seen == {"add_in_place": [1.0] * 3, "add_plus_equals": [1.0] * 3, "add_and_rebind": [0.0] * 3}


@pytest.mark.parametrize("method", METHODS)
def test_a_private_tensor_reaches_the_parent_only_where_it_is_pickled(method):
    private = torch.zeros(2)
    launch(sh.add_in_place, args=(private,), method=method)
    # fork: copy-on-write, the write stays in the child; spawn/forkserver: pickling shared it.
    assert private.tolist() == ([0.0, 0.0] if method == "fork" else [1.0, 1.0])
    assert private.is_shared() == (method != "fork")


def test_forking_pickler_sends_a_handle_and_shares_the_storage():
    from multiprocessing.reduction import ForkingPickler

    t = torch.zeros(100_000)
    handle = ForkingPickler.dumps(t)
    assert t.is_shared() and len(handle) < 1_000 < t.nbytes
    back = ForkingPickler.loads(handle)  # in this process: the same storage, from the cache
    assert back.data_ptr() == t.data_ptr()


@pytest.mark.spawn_in_notebook("02", "write_through_numpy")
@pytest.mark.parametrize("method", FAST_AND_SPAWN)
def test_write_through_numpy_reaches_the_parent(method):
    t = torch.zeros(3).share_memory_()
    launch(sh.write_through_numpy, args=(t,), nprocs=2, method=method)
    assert t.tolist() == [100.0, 101.0, 0.0]


@pytest.mark.parametrize("method", FAST_AND_SPAWN)
def test_nudge_weights_of_a_shared_module(method):
    model = torch.nn.Linear(2, 1)
    model.share_memory()
    before = model.weight.detach().clone()
    launch(sh.nudge_weights, args=(model, 2.0), method=method)
    assert torch.allclose(model.weight.detach(), before + 2.0)


def test_increment_workers_in_process():
    counter = torch.zeros(1, dtype=torch.int64)
    sh.increment_counter(0, counter, 10)
    counts = torch.zeros(2, dtype=torch.int64)
    sh.increment_own_slot(1, counts, 4)
    assert int(counter[0]) == 10 and counts.tolist() == [0, 4]


@pytest.mark.spawn_in_notebook("02", "increment_counter", "increment_own_slot")
@pytest.mark.parametrize("method", FAST_AND_SPAWN)
def test_count_in_processes_lock_and_slots_lose_nothing(method):
    locked = sh._count_in_processes(2, 200, mode="lock", method=method)
    slots = sh._count_in_processes(2, 200, mode="one slot per rank", method=method)
    assert locked["expected"] == slots["expected"] == 400 and locked["lost"] == slots["lost"] == 0


def test_count_in_processes_without_lock_never_overcounts():
    r = sh._count_in_processes(3, 500, mode="no lock")
    assert 0 < r["counted"] <= r["expected"] and r["lost"] == r["expected"] - r["counted"]


def test_count_in_processes_rejects_bad_input():
    with pytest.raises(ValueError, match="mode must be one of"):
        sh._count_in_processes(mode="atomic")
    with pytest.raises(ValueError, match="at least 1"):
        sh._count_in_processes(nprocs=0)


def test_race_demo_widget_callback_returns_the_counts():
    r = sh.race_demo(nprocs=2, mode="lock", n=50)
    assert r["counted"] == 100 and r["lost"] == 0


@pytest.mark.skipif(not LINUX, reason="/proc and /dev/shm are Linux-only")
@pytest.mark.parametrize("method", METHODS)
def test_strategy_footprint(method):
    fd, fs = (
        launch(sh.strategy_footprint, args=(s, 10), method=method)[0]
        for s in ("file_descriptor", "file_system")
    )
    assert (fd["shm_fds"], fd["dev_shm_names"]) == (10, 0)
    assert (fs["shm_fds"], fs["dev_shm_names"]) == (0, 10)
    assert fd["dev_shm_names_after_free"] == fs["dev_shm_names_after_free"] == 0
    assert sh.torch_entries_of(fs["pid"]) == []
    assert tmp.get_sharing_strategy() == "file_descriptor"  # the parent's setting is untouched


@pytest.mark.skipif(not LINUX, reason="RLIMIT_NOFILE and file_descriptor sharing as on Linux")
@pytest.mark.parametrize("method", FAST_AND_SPAWN)
def test_fd_limit_probe_file_descriptor_fails_file_system_does_not(method):
    fd = launch(sh.fd_limit_probe, args=("file_descriptor", 64, 100), method=method)[0]
    fs = launch(sh.fd_limit_probe, args=("file_system", 64, 100), method=method)[0]
    assert "Too many open files" in fd["error"] and fd["created"] < 64
    assert fs["error"] is None and fs["created"] == 100
    assert sh.torch_entries_of(fs["pid"]) == [] and sh.torch_entries_of(fd["pid"]) == []


@pytest.mark.skipif(not LINUX, reason="/proc/self/fd is Linux-only")
def test_open_shm_fds_counts_one_per_storage_not_per_view():
    before = sh.open_shm_fds()
    base = torch.zeros(100).share_memory_()
    views = [base[i : i + 10] for i in range(90)]
    assert sh.open_shm_fds() - before == 1 and all(v.is_shared() for v in views)
    other = torch.zeros(4).share_memory_()
    assert sh.open_shm_fds() - before == 2 and other.is_shared()


@pytest.mark.skipif(not LINUX, reason="file_system names in /dev/shm and SIGKILL as on Linux")
def test_share_then_die_leaves_names_that_the_manager_removes():
    import time

    child = tmp.get_context(FAST_METHOD).Process(target=sh.share_then_die, args=(0, 3))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == -9
    deadline = time.monotonic() + 15
    while sh.torch_entries_of(child.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sh.torch_entries_of(child.pid) == []


def test_torch_entries_of_this_process_is_empty_under_file_descriptor():
    keep = torch.zeros(4).share_memory_()
    assert keep.is_shared() and sh.torch_entries_of(os.getpid()) == []
