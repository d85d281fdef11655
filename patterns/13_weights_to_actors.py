"""A trainer publishes weights to actor processes: shared storage, a version, a lock. Run: python 13_weights_to_actors.py [method]"""

import sys
import time

import torch
import torch.multiprocessing as mp


def actor(rank, weights, version, lock, seen, rounds):
    torch.set_num_threads(1)  # the processes share the cores
    last, stop = 0, time.monotonic() + 60  # every wait bounded
    while last < rounds and time.monotonic() < stop:
        while int(version) == last and time.monotonic() < stop:  # nothing new (a real actor acts)
            time.sleep(0.005)
        with lock:  # the trainer writes under the same lock: a whole version, never half of one
            local, last = weights.clone(), int(version)  # its own copy: never re-send a received tensor
        seen.put((rank, last, bool((local == last).all())))


if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1] if len(sys.argv) > 1 else "spawn")
    weights = torch.zeros(100_000).share_memory_()  # GPU: a CUDA tensor, passed as here (spawn: CUDA IPC)
    version, lock, seen = torch.zeros((), dtype=torch.int64).share_memory_(), ctx.Lock(), ctx.Queue()
    actors = [ctx.Process(target=actor, args=(r, weights, version, lock, seen, 3)) for r in range(2)]
    for a in actors:
        a.start()
    for step in (1, 2, 3):  # the trainer: an optimizer step, then publish it in place
        with lock:
            version.copy_(weights.fill_(step)[0])  # the weights, then the version that names them
        print(sorted(seen.get(timeout=60) for _ in actors))  # the handshake: both actors have it
    for a in actors:
        a.join(timeout=60)
        if a.exitcode is None:
            a.terminate()
            a.join(timeout=10)
