"""Workers, a buffer pool and the handoff benchmark for notebook 03 (Queue and Pipe).

Everything that runs in a child lives here, so spawn and forkserver children can import it; every
worker sets its torch thread count first (the fork/OpenMP hang, notebook 04). Every get and join
is bounded.

Queues and pipes pickle what they carry: never read one that someone you do not trust can write to
(unpickling runs code).

Example
([03 · A producer/consumer pipeline](../notebooks/03_queues_and_pipes.ipynb#a-producer-consumer-pipeline):
producers end with a sentinel; the consumer counts sentinels)::

    >>> import torch.multiprocessing as mp
    >>> from helpers.queues import produce
    >>> ctx = mp.get_context(FAST_METHOD)
    >>> q, done = ctx.Queue(), ctx.Event()
    >>> producer = ctx.Process(target=produce, args=(7, q, 2, done))
    >>> producer.start()
    >>> items = [q.get(timeout=60) for _ in range(3)]
    >>> done.set(); producer.join(timeout=30); producer.exitcode
    0
    >>> [float(t.sum()) for t in items[:2]], items[2]
    ([70000.0, 70000.0], None)
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import threading
import time
from typing import TYPE_CHECKING

import numpy as np
import torch

from helpers.launch import FAST_METHOD
from helpers.processes import running

if TYPE_CHECKING:
    from collections.abc import Sequence
    from multiprocessing.connection import Connection
    from multiprocessing.queues import Queue as MPQueue
    from multiprocessing.queues import SimpleQueue as MPSimpleQueue
    from multiprocessing.synchronize import Event

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "pickled_size",
    "feeder_threads",
    "pipe_doubler",
    "produce",
    "put_arrays",
    "put_tensor",
    "pool_producer",
    "handoff_consumer",
    "handoff_times",
    "speedups",
    "plot_handoff",
    "compare_handoff",
]

MB = 2**20


def pickled_size(obj: object) -> int:
    """Bytes that cross a Queue or Pipe for ``obj``: the length of its ``ForkingPickler`` pickle.

    A tensor pickles to a small handle (its storage is moved to shared memory); a NumPy array to all
    of its bytes. The pickle is loaded back here, so the handle is consumed and nothing leaks.

    >>> pickled_size(np.zeros(MB // 4, dtype=np.float32)) > MB
    True
    >>> pickled_size(torch.zeros(MB // 4)) < 1000
    True
    """
    from multiprocessing.reduction import ForkingPickler

    data = bytes(ForkingPickler.dumps(obj))
    ForkingPickler.loads(data)
    return len(data)


def feeder_threads() -> int:
    """How many ``multiprocessing.Queue`` feeder threads this process runs now.
    [03 · Pipe and SimpleQueue](../notebooks/03_queues_and_pipes.ipynb#pipe-and-simplequeue) (a Queue's feeder thread; a Pipe has none).

    >>> feeder_threads() >= 0
    True
    """
    return sum(t.name == "QueueFeederThread" for t in threading.enumerate())


def pipe_doubler(conn: Connection) -> None:
    """Child end of a duplex ``Pipe``: receive tensors, send back ``2 * t``, stop on ``None``.

    Waits at most 30 s for each message (``poll``), so a parent that vanishes cannot strand it.
    Shown here in one process, both ends of the pipe in this process:

    >>> parent, child = mp.Pipe()
    >>> parent.send(torch.ones(2)); parent.send(None)
    >>> pipe_doubler(child)
    >>> parent.recv()
    tensor([2., 2.])
    """
    torch.set_num_threads(1)
    while conn.poll(30):
        item = conn.recv()
        if item is None:
            break
        conn.send(item * 2)
    conn.close()


def produce(rank: int, q: MPQueue, n_items: int, done: Event, timeout: float = 60.0) -> None:
    """Producer: put ``n_items`` tensors filled with ``rank`` on ``q``, then the sentinel ``None``;
    stay alive until the consumer sets ``done`` (at most ``timeout`` s). Used in
    [03 · A producer/consumer pipeline](../notebooks/03_queues_and_pipes.ipynb#a-producer-consumer-pipeline).

    >>> import queue
    >>> q, done = queue.Queue(), threading.Event()
    >>> done.set()
    >>> produce(2, q, 1, done)
    >>> float(q.get().sum()), q.get()
    (20000.0, None)
    """
    torch.set_num_threads(1)
    for _ in range(n_items):
        q.put(torch.full((10_000,), float(rank)))  # moved to shared memory; a handle crosses
    q.put(None)  # the sentinel: this producer has finished
    done.wait(timeout)  # keep our tensors alive until the consumer is done with them


def put_arrays(q: MPQueue | MPSimpleQueue, n_items: int, nbytes: int) -> None:
    """Producer: put ``n_items`` float32 NumPy arrays of ``nbytes`` bytes each (pickled whole), then
    exit. [03 · Join before get](../notebooks/03_queues_and_pipes.ipynb#join-before-get-a-deadlock) (a deadlock).

    >>> q = mp.get_context("spawn").SimpleQueue()
    >>> put_arrays(q, 2, 16)
    >>> q.get(), q.get()
    (array([1., 1., 1., 1.], dtype=float32), array([1., 1., 1., 1.], dtype=float32))
    """
    torch.set_num_threads(1)  # no torch op here, but the rule for fork workers holds everywhere
    for _ in range(n_items):
        q.put(np.ones(nbytes // 4, dtype=np.float32))


def put_tensor(q: MPQueue, nbytes: int, consumed: Event | None = None, timeout: float = 30) -> None:
    """Producer: put one float32 tensor of ``nbytes`` bytes (a shared-memory handle), then exit.
    Used in [03 · Keep the producer alive](../notebooks/03_queues_and_pipes.ipynb#keep-the-producer-alive).

    With an Event ``consumed``, stay alive until it is set (at most ``timeout`` s): the consumer sets
    it when it is done with the tensor. Under ``file_descriptor`` the consumer fetches the shared
    memory's fd from this process while it unpickles; for CUDA tensors the producer must live as
    long as the consumer uses the tensor. Without one it waits for the queue's feeder thread: a
    feeder still pickling during the exit makes multiprocessing's ``pymp-*`` folder after the exit's
    clean-up has listed what to remove, and the folder stays (CPython's ``util._run_finalizers``).

    >>> ctx = mp.get_context("spawn")
    >>> q, consumed = ctx.SimpleQueue(), ctx.Event()
    >>> consumed.set()  # already set: returns at once
    >>> put_tensor(q, 16, consumed)
    >>> q.get()
    tensor([1., 1., 1., 1.])
    """
    torch.set_num_threads(1)
    q.put(torch.ones(nbytes // 4))
    if consumed is None:  # exit at once, once the queue's feeder thread has sent the handle
        q.close()
        q.join_thread()
    else:
        consumed.wait(timeout)


def pool_producer(
    buffers: list[torch.Tensor], free: MPQueue, full: MPQueue, n_items: int, timeout: float = 30
) -> None:
    """Producer side of a buffer pool: take a free buffer index, fill that buffer in place, pass the
    index on; ``None`` at the end. Only small integers cross the queues; the data never moves.
    Used in [03 · A pool of reusable buffers](../notebooks/03_queues_and_pipes.ipynb#a-pool-of-reusable-buffers).

    >>> import queue
    >>> buffers, free, full = [torch.zeros(2), torch.zeros(2)], queue.Queue(), queue.Queue()
    >>> free.put(0); free.put(1)
    >>> pool_producer(buffers, free, full, n_items=2)
    >>> [full.get() for _ in range(3)], [b.tolist() for b in buffers]
    ([(0, 0), (1, 1), None], [[0.0, 0.0], [1.0, 1.0]])
    """
    torch.set_num_threads(1)
    for i in range(n_items):
        index = free.get(timeout=timeout)
        buffers[index].fill_(float(i))
        full.put((index, i))
    full.put(None)


# --- the handoff benchmark ---------------------------------------------------------------------

_HANDOFF_METHODS = (
    "pickled numpy",
    "pickled numpy, Pipe",
    "fresh tensor",
    "pre-shared tensor",
    "reused buffer",
)


def handoff_consumer(inbox: MPQueue | Connection, acks: MPQueue, buffers: dict[float, torch.Tensor]) -> None:
    """Consumer of the handoff benchmark: acknowledge each item with its last element; stop at None.

    ``inbox`` is a Queue or a Pipe's end. It reads *one* element of what it received: the benchmark
    measures the handoff, not access to the data. Used in [03 · What a handoff costs](../notebooks/03_queues_and_pipes.ipynb#what-a-handoff-costs).

    >>> import queue
    >>> inbox, acks = queue.Queue(), queue.Queue()
    >>> inbox.put(torch.ones(3)); inbox.put(("buffer", 1)); inbox.put(None)
    >>> handoff_consumer(inbox, acks, {1: torch.zeros(2)})
    >>> acks.get(), acks.get()
    (1.0, 0.0)
    """
    torch.set_num_threads(1)
    while True:
        if hasattr(inbox, "recv"):  # a Pipe's end: poll bounds the wait
            item = inbox.recv() if inbox.poll(60) else None
        else:  # a Queue
            item = inbox.get(timeout=60)
        if item is None:  # the sentinel (or a silent pipe)
            break
        if isinstance(item, tuple):  # ("buffer", size_mb): the data is already in our shared buffer
            item = buffers[item[1]]
        acks.put(float(item[-1]))
        del item


def _payload(how: str, size_mb: float, value: float, cache: dict):
    """The object to hand off, built outside the timed region.

    A fresh tensor is new every time (put must copy it into shared memory). The others are built
    once per size and reused with a new last value: a pickled array costs the same every time, and
    a pre-shared tensor is sent as a new handle each time (the consumer dropped the last one).
    """
    numel = int(size_mb * MB) // 4
    if how == "fresh tensor":
        return torch.full((numel,), value)
    if size_mb not in cache:
        pickled = how.startswith("pickled numpy")
        cache[size_mb] = np.ones(numel, np.float32) if pickled else torch.ones(numel).share_memory_()
    cache[size_mb][-1] = value  # for "reused buffer": the producer writes into the pool buffer in place
    return ("buffer", size_mb) if how == "reused buffer" else cache[size_mb]


def handoff_times(
    sizes_mb: Sequence[float] = (1, 16, 256),
    methods: Sequence[str] = _HANDOFF_METHODS,
    repeat: int = 3,
    method: str = FAST_METHOD,
    budget_s: float = 2.0,
) -> list[dict]:
    """Median seconds to hand one float32 payload of each size to a consumer process, per method.

    Timed: from ``put`` until the consumer's acknowledgement arrives (the consumer has the object
    and has read its last element). Building the payload is not timed. Methods (all by
    default): ``pickled numpy`` (bytes through a Queue), ``pickled numpy, Pipe``
    (the same bytes through a Pipe: no feeder thread), ``fresh tensor`` (storage
    moved to shared memory on put), ``pre-shared tensor`` (created with ``share_memory_()``: only a
    handle crosses), ``reused buffer`` (written in place into a buffer the consumer mapped at start:
    only an index crosses). One consumer per method, started with ``method``; rows are dicts with
    ``method``, ``size_mb``, ``seconds`` (median) and ``times``. Repeats stop early once one
    method and size has taken ``budget_s`` seconds (at least one run each), so slow cases cost
    one run.

    >>> rows = handoff_times(sizes_mb=(1,), repeat=1, method=FAST_METHOD)
    >>> [r["method"] for r in rows] == list(_HANDOFF_METHODS)
    True
    """
    unknown = set(methods) - set(_HANDOFF_METHODS)
    if unknown or repeat < 1:
        raise ValueError(
            f"methods must come from {_HANDOFF_METHODS} and repeat >= 1; got {unknown}, {repeat}"
        )
    ctx = mp.get_context(method)
    rows = []
    for how in methods:
        # The pool's buffers are shared before the consumer starts, which maps them once.
        pool = how == "reused buffer"
        buffers = {s: torch.zeros(int(s * MB) // 4).share_memory_() for s in sizes_mb} if pool else {}
        cache = buffers if pool else {}
        acks = ctx.Queue()
        if how.endswith("Pipe"):
            sender, inbox = ctx.Pipe()
            send = sender.send
        else:
            inbox = ctx.Queue()
            send = inbox.put
        consumer = ctx.Process(target=handoff_consumer, args=(inbox, acks, buffers))
        with running([consumer], timeout=600):
            _handoff_once(send, acks, _payload(how, min(sizes_mb), -1.0, cache), -1.0)  # warm-up
            for size in sizes_mb:
                times = []
                for k in range(repeat):
                    if sum(times) > budget_s:
                        break
                    payload = _payload(how, size, float(k), cache)
                    times.append(_handoff_once(send, acks, payload, float(k)))
                    del payload
                rows.append(
                    {"method": how, "size_mb": size, "seconds": statistics.median(times), "times": times}
                )
            send(None)
        del buffers, cache
    return rows


def _handoff_once(send, acks, payload, expected: float) -> float:
    start = time.perf_counter()
    send(payload)
    got = acks.get(timeout=120)
    seconds = time.perf_counter() - start
    if got != expected:
        raise RuntimeError(f"the consumer read {got}, expected {expected}")
    return seconds


def speedups(rows: list[dict], baseline: str = "pickled numpy") -> dict:
    """``{size_mb: {method: baseline_seconds / method_seconds}}`` from :func:`handoff_times` rows.

    >>> speedups([{"method": "pickled numpy", "size_mb": 1, "seconds": 2.0},
    ...           {"method": "pre-shared tensor", "size_mb": 1, "seconds": 0.5}])
    {1: {'pickled numpy': 1.0, 'pre-shared tensor': 4.0}}
    """
    base = {r["size_mb"]: r["seconds"] for r in rows if r["method"] == baseline}
    if not base:
        raise ValueError(f"no rows for the baseline {baseline!r}")
    table: dict = {}
    for r in rows:
        if r["size_mb"] in base:
            table.setdefault(r["size_mb"], {})[r["method"]] = base[r["size_mb"]] / r["seconds"]
    return table


_COLORS = dict(zip(_HANDOFF_METHODS, ("#d95f02", "#e6ab02", "#7570b3", "#1b9e77", "#e7298a"), strict=True))


def plot_handoff(
    rows: list[dict], title: str = "Handing a payload to another process"
) -> tuple[Figure, Axes]:
    """Log-log plot of handoff time (ms) against payload size (MB), one line per method.

    >>> fig, ax = plot_handoff([{"method": "fresh tensor", "size_mb": 1, "seconds": 0.01},
    ...                         {"method": "fresh tensor", "size_mb": 16, "seconds": 0.02}])
    """
    from helpers.plotting import new_figure

    fig, ax = new_figure(title, "payload size (MB)", "handoff time (ms)")
    for how in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == how]
        ax.plot(
            [r["size_mb"] for r in mine],
            [r["seconds"] * 1e3 for r in mine],
            "o-",
            label=how,
            color=_COLORS.get(how),
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({r["size_mb"] for r in rows})
    ax.set_xticks(sizes, [f"{s:g}" for s in sizes])
    ax.minorticks_off()
    ax.legend()
    return fig, ax


def compare_handoff(size_mb: int = 16, repeat: int = 2, method: str = FAST_METHOD) -> list[dict]:
    """Widget callback: time every handoff method at one size, draw bars (log scale).

    >>> len(compare_handoff(1, repeat=1, method=FAST_METHOD)) == len(_HANDOFF_METHODS)
    True
    """
    import matplotlib.pyplot as plt

    from helpers.plotting import bar_chart, new_figure

    rows = handoff_times((size_mb,), repeat=repeat, method=method)
    fig, ax = new_figure(f"Handing over {size_mb} MB", "", "ms (log scale)")
    bar_chart(
        ax,
        [r["method"] for r in rows],
        [r["seconds"] * 1e3 for r in rows],
        fmt="{:.2f}",
        colors=[_COLORS[r["method"]] for r in rows],
    )
    ax.set_yscale("log")
    plt.show()
    return rows
