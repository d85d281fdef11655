"""Tests for helpers.dataloading (notebook 07): datasets, seeding, worker options, memory."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import helpers.dataloading as hd
from helpers.launch import FAST_METHOD
from helpers.processes import live_children
from tests.workers import METHODS


def test_slow_squares_and_bad_input():
    assert [int(hd.SlowSquares(3, work=5)[i]) for i in range(3)] == [0, 1, 4]
    with pytest.raises(ValueError, match="must be >= 0"):
        hd.SlowSquares(-1)


@pytest.mark.spawn_in_notebook("07", "WhoLoadedMe", "Numbers", "ShardedNumbers")
@pytest.mark.parametrize("method", METHODS)
def test_worker_info_and_sharding_under_every_method(method):
    loader = DataLoader(hd.WhoLoadedMe(4), batch_size=2, num_workers=2, multiprocessing_context=method)
    assert [worker for _, worker, *_ in hd.collect(loader)] == [0, 0, 1, 1]
    unsharded = DataLoader(hd.Numbers(4), batch_size=2, num_workers=2, multiprocessing_context=method)
    assert sorted(hd.collect(unsharded)) == [0, 0, 1, 1, 2, 2, 3, 3]
    sharded = DataLoader(hd.ShardedNumbers(4), batch_size=2, num_workers=2, multiprocessing_context=method)
    assert sorted(hd.collect(sharded)) == [0, 1, 2, 3]


def _draws(seed, n=32):
    """RandomDraws through a shuffling 2-worker DataLoader, as notebook 07 section 4 builds it."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    loader = DataLoader(
        hd.RandomDraws(n),
        batch_size=4,
        shuffle=True,
        num_workers=2,
        generator=generator,
        multiprocessing_context=FAST_METHOD,
    )
    return hd.collect(loader)


def test_draws_are_unique_and_a_seeded_generator_alone_repeats_them():
    first = _draws(0)
    assert len({d[0] for d in first}) == 32
    assert len({d[1] for d in first}) == 32 and len({d[2] for d in first}) == 32  # random, torch too
    assert first == _draws(0)  # numpy, random and torch draws repeat: no worker_init_fn needed
    assert first != _draws(1)
    assert _draws(None) != _draws(None)


def _own_draws(method, worker_init_fn=None, seed=0):
    """OwnGenerator through 2 workers, batches of 2, as notebook 07's appendix builds it."""
    loader = DataLoader(
        hd.OwnGenerator(8),
        batch_size=2,
        num_workers=2,
        worker_init_fn=worker_init_fn,
        generator=torch.Generator().manual_seed(seed),
        multiprocessing_context=method,
    )
    return hd.collect(loader)


@pytest.mark.spawn_in_notebook("07", "OwnGenerator", "seed_own_generator")
@pytest.mark.parametrize("method", METHODS)
def test_a_dataset_own_generator_repeats_across_workers_until_seed_own_generator(method):
    copies = _own_draws(method)
    assert copies[:2] == copies[2:4] and copies[4:6] == copies[6:8]  # worker 1 repeats worker 0
    assert len(set(_own_draws(method, hd.seed_own_generator))) == 8
    assert live_children() == []


def test_the_generator_reaches_seed_own_generator_but_not_the_dataset_own_generator():
    assert _own_draws(FAST_METHOD) == _own_draws(FAST_METHOD, seed=1)
    seeded = _own_draws(FAST_METHOD, hd.seed_own_generator)
    assert seeded == _own_draws(FAST_METHOD, hd.seed_own_generator)
    assert seeded != _own_draws(FAST_METHOD, hd.seed_own_generator, seed=1)


def test_seed_own_generator_does_nothing_in_the_main_process():
    dataset = hd.OwnGenerator(2)
    rng = dataset.rng
    hd.seed_own_generator(0)
    assert dataset.rng is rng


def test_throughput_and_widget_callback(capsys):
    assert hd._measure_throughput(1, n=16, batch_size=4, work=10) > 0
    assert hd.explore_loader(0, 8) > 0
    assert "0 workers, batch 8" in capsys.readouterr().out
    with pytest.raises(ValueError):
        hd._measure_throughput(-1)


def _first_batch_seconds(persistent):
    loader = DataLoader(
        TensorDataset(torch.arange(4)),
        num_workers=1,
        persistent_workers=persistent,
        multiprocessing_context="spawn",
    )
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        batches = iter(loader)
        next(batches)
        seconds.append(time.perf_counter() - start)
        list(batches)
    return seconds


def test_persistent_workers_start_once():
    fresh = _first_batch_seconds(False)
    kept = _first_batch_seconds(True)
    assert kept[1] < fresh[1] / 5
    assert live_children() == []


@pytest.mark.parametrize("factor", [1, 3])
def test_workers_load_prefetch_factor_batches_ahead(factor):
    method = FAST_METHOD
    loaded = mp.get_context(method).Value("i", 0)
    loader = DataLoader(
        hd.CountingDataset(64, loaded),
        batch_size=1,
        num_workers=2,
        prefetch_factor=factor,
        multiprocessing_context=method,
    )
    batches = iter(loader)
    deadline = time.monotonic() + 60
    while loaded.value < 2 * factor and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    del batches
    assert loaded.value == 2 * factor
    assert live_children() == []


def test_counting_dataset_counts():
    loaded = mp.get_context("spawn").Value("i", 0)
    ds = hd.CountingDataset(2, loaded)
    assert [ds[0], ds[1]] == [0, 1] and loaded.value == 2


def test_a_timeout_ends_a_stuck_worker_and_a_module_level_dataset_loads_under_spawn():
    # Stuck for good (terminated 5 s after the iterator goes): a worker that is only slow sends its
    # batch as it is being stopped, and that first send, racing the worker's exit, can leave a pymp-*
    # folder (multiprocessing's, made for the batch's file descriptor) in the temporary directory.
    stuck = DataLoader(
        hd.SlowSquares(1, work=0, delay=60), num_workers=1, timeout=1, multiprocessing_context=FAST_METHOD
    )
    with pytest.raises(RuntimeError, match="DataLoader timed out after 1 seconds"):
        next(iter(stuck))
    spawned = DataLoader(
        hd.SlowSquares(2, work=1), batch_size=2, num_workers=1, multiprocessing_context="spawn"
    )
    assert next(iter(spawned)).tolist() == [0, 1]
    assert live_children() == []


def test_records_and_worker_memory():
    assert hd.Records(10, as_array=False, block=5)[1] == 35.0
    assert len(hd.Records(11, as_array=True, block=5)) == 3
    if FAST_METHOD == "fork":
        as_list = hd.worker_memory(hd.Records(1_000_000, as_array=False))
        as_array = hd.worker_memory(hd.Records(1_000_000, as_array=True))
        assert as_list["uss"] > as_array["uss"] + 15  # MB: 1M floats are ~32 MB of objects
    assert live_children() == []


def test_throughput_runs_the_train_step_on_every_batch():
    seen = []
    assert hd._measure_throughput(0, n=8, batch_size=4, work=1, train_step=seen.append) > 0
    assert [batch.tolist() for batch in seen] == [[0, 1, 4, 9], [16, 25, 36, 49]]


def test_a_worker_killed_by_sigbus_reads_as_the_shared_memory_error():
    import signal

    if not hasattr(signal, "SIGBUS"):
        pytest.skip("no SIGBUS on this platform")
    loader = DataLoader(hd.SignalsInWorker(signal.SIGBUS), num_workers=1, multiprocessing_context=FAST_METHOD)
    with pytest.raises(RuntimeError, match="exited unexpectedly") as raised:
        next(iter(loader))
    assert "is killed by signal: Bus error" in str(raised.value.__cause__)
    with pytest.raises(RuntimeError, match="only signals a DataLoader worker"):
        hd.SignalsInWorker(signal.SIGBUS)[0]
    assert live_children() == []
