"""helpers.queues: the workers, pipelines, buffer pool and handoff benchmark behind notebook 03."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch
import torch.multiprocessing as tmp

import helpers.queues as qu
from helpers.processes import reap
from tests.workers import METHODS

# Spawn children import torch (seconds each on a busy machine): the less central tests run under
# this platform's fast method and spawn only; the central ones under every method.
FAST_AND_SPAWN = sorted({qu.FAST_METHOD, "spawn"})

matplotlib.use("Agg")


def test_pickled_size_tensor_is_a_handle_array_is_its_bytes():
    t = torch.zeros(2**18)
    assert not t.is_shared()
    assert qu.pickled_size(t) < 1000 and t.is_shared()
    assert qu.pickled_size(np.zeros(2**18, dtype=np.float32)) > 2**20


def test_feeder_threads_counts_queue_threads():
    import multiprocessing as mp

    before = qu.feeder_threads()
    q = mp.get_context("spawn").Queue()
    q.put(1)
    assert qu.feeder_threads() == before + 1
    assert q.get(timeout=5) == 1
    q.close()
    q.join_thread()
    assert qu.feeder_threads() == before


@pytest.mark.parametrize("method", FAST_AND_SPAWN)
def test_pipe_doubler_round_trip(method):
    import multiprocessing as mp

    ctx = mp.get_context(method)
    here, there = ctx.Pipe()
    proc = ctx.Process(target=qu.pipe_doubler, args=(there,))
    proc.start()
    try:
        here.send(torch.arange(3.0))
        assert here.poll(60)
        assert here.recv().tolist() == [0.0, 2.0, 4.0]
        here.send(None)
    finally:
        assert reap([proc], timeout=30) == [0]


@pytest.mark.parametrize("method", METHODS)
def test_consumers_with_one_sentinel_each_take_every_item_once(method):
    # Notebook 03 section 3, the plain pattern: items, one sentinel per consumer, bounded gets.
    ctx = tmp.get_context(method)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    consumers = [ctx.Process(target=qu.consume, args=(rank, inbox, outbox)) for rank in range(3)]
    for c in consumers:
        c.start()
    for i in range(12):
        inbox.put(torch.full((100,), float(i)))
    for _ in consumers:
        inbox.put(None)
    messages = [outbox.get(timeout=60) for _ in range(12 + 3)]
    assert reap(consumers, timeout=30) == [0, 0, 0]
    assert sum(value for rank, value in messages if rank != "done") == 100 * sum(range(12))
    assert sorted(rank for key, rank in messages if key == "done") == [0, 1, 2]


def _start_producer(ctx, target, *args):
    q = ctx.Queue()
    producer = ctx.Process(target=target, args=(q, *args))
    producer.start()
    return q, producer


def test_join_before_get_deadlocks_on_a_large_array_and_get_first_does_not():
    ctx = tmp.get_context(qu.FAST_METHOD)
    q, producer = _start_producer(ctx, qu.put_array, 4 * qu.MB)
    producer.join(timeout=1)
    assert producer.is_alive()  # stuck: its feeder thread waits for us to read the pipe
    assert q.get(timeout=30).nbytes == 4 * qu.MB
    assert reap([producer], timeout=30) == [0]
    q, producer = _start_producer(ctx, qu.put_array, 4 * qu.MB)
    assert q.get(timeout=30).nbytes == 4 * qu.MB
    assert reap([producer], timeout=30) == [0]


@pytest.mark.parametrize("method", METHODS)
def test_a_tensor_from_a_producer_that_exited_depends_on_the_sharing_strategy(method):
    ctx = tmp.get_context(method)
    q, producer = _start_producer(ctx, qu.put_tensor, qu.MB)
    producer.join(timeout=60)
    assert not producer.is_alive()  # a handle does not fill the pipe: no deadlock
    if tmp.get_sharing_strategy() == "file_descriptor":  # the fd was to come from the producer
        with pytest.raises((ConnectionRefusedError, FileNotFoundError, OSError)):
            q.get(timeout=10)
    else:  # file_system: a named segment the producer's reference kept alive
        assert q.get(timeout=10).numel() == qu.MB // 4


@pytest.mark.parametrize("method", METHODS)
def test_a_producer_kept_alive_until_the_get_hands_over_its_tensor(method):
    ctx = tmp.get_context(method)
    consumed = ctx.Event()
    q, producer = _start_producer(ctx, qu.put_tensor, qu.MB, consumed)
    assert q.get(timeout=60).numel() == qu.MB // 4
    consumed.set()
    assert reap([producer], timeout=30) == [0]


def test_put_workers_put_one_item():
    import queue

    q = queue.Queue()
    qu.put_array(q, 64)
    qu.put_tensor(q, 64)
    assert q.get().shape == (16,) and q.get().shape == (16,)


def test_consume_and_pool_producer_in_process():
    import queue

    inbox, outbox = queue.Queue(), queue.Queue()
    for item in (torch.ones(3), None):
        inbox.put(item)
    qu.consume(5, inbox, outbox)
    assert outbox.get() == (5, 3.0) and outbox.get() == ("done", 5)
    buffers, free, full = [torch.zeros(2)], queue.Queue(), queue.Queue()
    free.put(0)
    qu.pool_producer(0, buffers, free, full, n_items=1)
    assert full.get() == (0, 0) and full.get() is None


@pytest.mark.parametrize("method", METHODS)
def test_run_buffer_pool_reuses_the_same_storages(method):
    r = qu.run_buffer_pool(n_buffers=2, n_items=10, numel=1000, method=method)
    assert r["items"] == 10 and r["all_correct"] and r["same_storage"]
    assert set(r["buffers_used"]) <= {0, 1}


@pytest.mark.parametrize("method", FAST_AND_SPAWN)
def test_handoff_times_small_sizes(method):
    rows = qu.handoff_times(sizes_mb=(0.25, 1), repeat=2, method=method)  # 4 consumer processes
    assert [(r["method"], r["size_mb"]) for r in rows] == [
        (m, s) for m in qu._HANDOFF_METHODS for s in (0.25, 1)
    ]
    assert all(1 <= len(r["times"]) <= 2 for r in rows)
    assert all(r["seconds"] > 0 for r in rows)  # a figure, no bound on it: not a `serial` test


def test_handoff_times_rejects_unknown_methods():
    with pytest.raises(ValueError, match="methods must come from"):
        qu.handoff_times(methods=("carrier pigeon",))


def test_speedups_and_plot():
    rows = [
        {"method": "pickled numpy", "size_mb": 1, "seconds": 1.0},
        {"method": "reused buffer", "size_mb": 1, "seconds": 0.01},
    ]
    assert qu.speedups(rows) == {1: {"pickled numpy": 1.0, "reused buffer": 100.0}}
    with pytest.raises(ValueError, match="baseline"):
        qu.speedups(rows, baseline="fresh tensor")
    fig, ax = qu.plot_handoff(rows)
    assert len(ax.get_lines()) == 2


def test_compare_handoff_widget_callback():
    rows = qu.compare_handoff(size_mb=1, repeat=1)
    assert [r["method"] for r in rows] == list(qu._HANDOFF_METHODS)
