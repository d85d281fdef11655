"""helpers.queues: the workers, buffer pool and handoff benchmark behind notebook 03."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import matplotlib
import numpy as np
import pytest
import torch
import torch.multiprocessing as tmp

import helpers.queues as qu
from helpers.launch import FAST_METHOD
from helpers.processes import reap
from tests.workers import METHODS

# Spawn children import torch (seconds each on a busy machine): the less central tests run under
# this platform's fast method and spawn only; the central ones under every method.
FAST_AND_SPAWN = sorted({FAST_METHOD, "spawn"})

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


@pytest.mark.spawn_in_notebook("03", "produce")
@pytest.mark.parametrize("method", METHODS)
def test_producers_with_one_sentinel_each_deliver_every_item(method):
    # Notebook 03 section 3: items and sentinels only, the consumer counts sentinels, then joins.
    ctx = tmp.get_context(method)
    q, done = ctx.Queue(), ctx.Event()
    producers = [ctx.Process(target=qu.produce, args=(rank, q, 3, done)) for rank in range(3)]
    for p in producers:
        p.start()
    per_producer = [0, 0, 0]
    try:
        for _ in producers:
            while (item := q.get(timeout=60)) is not None:
                assert item.is_shared()
                per_producer[int(item[0])] += 1
    finally:
        done.set()
        assert reap(producers, timeout=30) == [0, 0, 0]
    assert per_producer == [3, 3, 3]


def _start_producer(ctx, target, *args):
    q = ctx.Queue()
    producer = ctx.Process(target=target, args=(q, *args))
    producer.start()
    return q, producer


@pytest.mark.parametrize("n_items, nbytes", [(1, 4 * qu.MB), (100, 1024)], ids=["one large", "many small"])
def test_join_before_get_deadlocks_once_the_unread_data_exceeds_the_pipe(n_items, nbytes):
    # 100 items of 1 KB are 100 KB in all: more than a 64 KiB Linux pipe, although each item is tiny.
    ctx = tmp.get_context(FAST_METHOD)
    q, producer = _start_producer(ctx, qu.put_arrays, n_items, nbytes)
    producer.join(timeout=1)
    assert producer.is_alive()  # stuck: its feeder thread waits for us to read the pipe
    assert [q.get(timeout=30).nbytes for _ in range(n_items)] == [nbytes] * n_items
    assert reap([producer], timeout=30) == [0]
    q, producer = _start_producer(ctx, qu.put_arrays, n_items, nbytes)  # get first, then join
    assert len([q.get(timeout=30) for _ in range(n_items)]) == n_items
    assert reap([producer], timeout=30) == [0]


def test_a_few_small_items_fit_in_the_pipe_so_join_first_returns():
    ctx = tmp.get_context(FAST_METHOD)
    q, producer = _start_producer(ctx, qu.put_arrays, 10, 1024)  # 10 KB in all
    producer.join(timeout=30)
    assert producer.exitcode == 0
    assert len([q.get(timeout=30) for _ in range(10)]) == 10


@pytest.mark.spawn_in_notebook("03", "put_tensor")
@pytest.mark.skipif(tmp.get_sharing_strategy() != "file_descriptor", reason="file_descriptor only")
@pytest.mark.parametrize("method", METHODS)
def test_a_tensor_from_a_producer_that_exited_cannot_be_received_under_file_descriptor(method):
    ctx = tmp.get_context(method)
    q, producer = _start_producer(ctx, qu.put_tensor, qu.MB)
    producer.join(timeout=60)
    assert not producer.is_alive()  # a handle does not fill the pipe: no deadlock
    with pytest.raises((ConnectionRefusedError, ConnectionResetError, FileNotFoundError)):
        q.get(timeout=10)  # the fd was to come from the producer process


@pytest.mark.skipif(sys.platform != "linux" or FAST_METHOD != "fork", reason="Linux fork only")
def test_under_file_system_torch_shm_manager_unlinks_the_segment_2_s_after_the_producer_exits():
    # Notebook 03's last appendix. In a fresh interpreter: this one may be a client of a manager.
    script = textwrap.dedent(
        """
        import time
        import torch.multiprocessing as mp
        from helpers import queues as qu
        mp.set_sharing_strategy("file_system")
        ctx = mp.get_context("fork")
        for wait in (3.0, 0.0):
            q = ctx.Queue()
            producer = ctx.Process(target=qu.put_tensor, args=(q, qu.MB))
            producer.start()
            producer.join(timeout=30)
            time.sleep(wait)
            try:
                print(wait, "received", q.get(timeout=10).numel())
            except RuntimeError as exc:
                print(wait, "failed", exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["3.0 failed No such file or directory", f"0.0 received {qu.MB // 4}"]


@pytest.mark.spawn_in_notebook("03", "put_tensor")
@pytest.mark.parametrize("method", METHODS)
def test_a_producer_kept_alive_until_the_consumer_is_done_hands_over_its_tensor(method):
    ctx = tmp.get_context(method)
    consumed = ctx.Event()
    q, producer = _start_producer(ctx, qu.put_tensor, qu.MB, consumed)
    kept = q.get(timeout=60)
    assert float(kept.sum()) == qu.MB // 4
    del kept
    consumed.set()
    assert reap([producer], timeout=30) == [0]


def test_put_workers_and_produce_in_process():
    import queue
    import threading

    q, done = queue.Queue(), threading.Event()
    qu.put_arrays(q, 2, 64)
    sent = threading.Event()
    sent.set()  # a thread's queue has no feeder thread to wait for
    qu.put_tensor(q, 64, sent)
    assert [q.get().shape for _ in range(3)] == [(16,), (16,), (16,)]
    done.set()
    qu.produce(4, q, 2, done)
    assert [float(q.get().sum()) for _ in range(2)] == [40_000.0, 40_000.0] and q.get() is None


@pytest.mark.spawn_in_notebook("03", "pool_producer")
@pytest.mark.parametrize("method", METHODS)
def test_pool_producer_fills_the_same_storages_in_place(method):
    # Notebook 03 section 6: the consumer loop written in the notebook's cells.
    ctx = tmp.get_context(method)
    buffers = [torch.zeros(1000).share_memory_() for _ in range(2)]
    pointers = [b.data_ptr() for b in buffers]
    free, full = ctx.Queue(), ctx.Queue()
    for index in range(len(buffers)):
        free.put(index)
    producer = ctx.Process(target=qu.pool_producer, args=(buffers, free, full, 10))
    producer.start()
    checked, used = 0, set()
    try:
        while (message := full.get(timeout=60)) is not None:
            index, i = message
            assert (buffers[index] == i).all()
            checked, used = checked + 1, used | {index}
            free.put(index)
    finally:
        assert reap([producer], timeout=30) == [0]
    assert checked == 10 and used <= {0, 1} and [b.data_ptr() for b in buffers] == pointers


@pytest.mark.spawn_in_notebook("03", "handoff_times")
@pytest.mark.parametrize("method", FAST_AND_SPAWN)
def test_handoff_times_small_sizes(method):
    rows = qu.handoff_times(sizes_mb=(0.25, 1), repeat=2, method=method)  # 4 consumer processes
    assert [(r["method"], r["size_mb"]) for r in rows] == [
        (m, s) for m in qu._HANDOFF_METHODS for s in (0.25, 1)
    ]
    assert all(1 <= len(r["times"]) <= 2 for r in rows)
    assert all(r["seconds"] > 0 for r in rows)  # a figure, no bound on it


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
