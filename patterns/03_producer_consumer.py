"""Producers put tensors on a torch.multiprocessing Queue, each ending with a sentinel; the parent consumes.
Run: python 03_producer_consumer.py [fork|spawn|forkserver]   (default: spawn)"""

import sys

import torch
import torch.multiprocessing as mp


def producer(rank, q, done):
    torch.set_num_threads(1)  # one thread per process: no oversubscription, fork-safe
    for _ in range(5):
        q.put(torch.full((1000,), float(rank)))  # storage moves to shared memory; a handle crosses
    q.put(None)  # the sentinel: this producer has finished
    done.wait(timeout=60)  # keep our tensors alive until the consumer is done with them


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx = mp.get_context(method)
    q, done = ctx.Queue(), ctx.Event()
    producers = [ctx.Process(target=producer, args=(rank, q, done)) for rank in range(2)]
    for p in producers:
        p.start()
    total = 0.0
    for _ in producers:  # each pass ends at a sentinel: stop once every producer has sent its own
        while (item := q.get(timeout=60)) is not None:
            total += item.sum().item()  # use the tensor; the next get drops our reference to it
    done.set()  # we hold none of their tensors now: the producers may exit
    for p in producers:
        p.join(timeout=60)  # join only after the queue is drained
        if p.exitcode is None:  # still running after its deadline: stop it, then reap it
            p.terminate()
            p.join(timeout=5)
    print(f"{method}: 2 producers, total {total:.0f}, exit codes {[p.exitcode for p in producers]}")
    sys.exit(0 if total == 5_000 and all(p.exitcode == 0 for p in producers) else 1)
