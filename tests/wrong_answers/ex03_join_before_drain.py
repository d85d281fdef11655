"""Wrong: joins the producer before reading its items: deadlock once the pipe is full."""

import multiprocessing as mp

from solutions.ex03_queues import producer  # noqa: F401 (the producer is right)


def collect(n_items: int, item_size: int, method: str = "fork") -> list[bytes]:
    ctx = mp.get_context(method)
    q = ctx.Queue()
    p = ctx.Process(target=producer, args=(q, n_items, item_size))
    p.start()
    p.join()  # the mistake: waits for a process that cannot exit until its items are read
    items = []
    while (item := q.get()) is not None:
        items.append(item)
    return items
