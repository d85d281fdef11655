"""A trainer publishes weights to actor processes: shared storage, a version, a lock. Run: python 13_weights_to_actors.py [method]"""

import sys
import time

import torch
import torch.multiprocessing as mp


def actor(rank, weights, version, lock, seen, rounds):
    torch.set_num_threads(1)  # the processes share the cores
    last, stop = 0, time.monotonic() + 60  # every wait bounded
    while last < rounds and time.monotonic() < stop:
        if int(version) == last:  # nothing new yet (a real actor acts on its copy meanwhile)
            time.sleep(0.005)
            continue
        with lock:  # the trainer writes under the same lock: a whole version, never half of one
            local, last = weights.clone(), int(version)  # a copy of its own: never re-send a received tensor
        seen.put((rank, last, bool((local == last).all())))


if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1] if len(sys.argv) > 1 else "spawn")
    weights = torch.zeros(100_000).share_memory_()  # on a GPU: a CUDA tensor, sent once through a torch Queue
    version, lock, seen, rounds = (
        torch.zeros((), dtype=torch.int64).share_memory_(),
        ctx.Lock(),
        ctx.Queue(),
        3,
    )
    actors = [ctx.Process(target=actor, args=(r, weights, version, lock, seen, rounds)) for r in range(2)]
    for a in actors:
        a.start()
    for step in range(1, rounds + 1):  # the trainer: an optimizer step, then publish it in place
        with lock:
            weights.fill_(step)
            version.fill_(step)
        print(sorted(seen.get(timeout=60) for _ in actors))  # the handshake: both actors have it
    for a in actors:
        a.join(timeout=60)
    assert all(a.exitcode == 0 for a in actors)
