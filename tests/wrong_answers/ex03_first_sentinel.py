"""Wrong: the consumer stops at the first sentinel, though every producer sends its own."""

import torch.multiprocessing as mp
from helpers.solutions.ex03_queues import producer  # noqa: F401 (the producer is right)


def consume(n_producers: int, n_items: int, method: str = "spawn") -> float:
    ctx = mp.get_context(method)
    q, done = ctx.Queue(), ctx.Event()
    producers = [ctx.Process(target=producer, args=(rank, q, done, n_items)) for rank in range(n_producers)]
    for p in producers:
        p.start()
    total = 0.0
    while (item := q.get(timeout=60)) is not None:  # the mistake: the first producer to finish ends it
        total += item.sum().item()
    done.set()
    for p in producers:
        p.join(timeout=60)
    return total
