"""Wrong: joins the producers before reading their items: they wait for the consumer, which waits for them."""

import torch.multiprocessing as mp
from helpers.solutions.ex03_queues import producer  # noqa: F401 (the producer is right)


def consume(n_producers: int, n_items: int, method: str = "spawn") -> float:
    ctx = mp.get_context(method)
    q, done = ctx.Queue(), ctx.Event()
    producers = [ctx.Process(target=producer, args=(rank, q, done, n_items)) for rank in range(n_producers)]
    for p in producers:
        p.start()
    for p in producers:
        p.join()  # the mistake: a producer cannot finish before its items are read and done is set
    total, finished = 0.0, 0
    while finished < n_producers:
        item = q.get(timeout=60)
        if item is None:
            finished += 1
        else:
            total += item.sum().item()
    done.set()
    return total
