"""Share one tensor with N processes: each writes its own row in place, the parent checks them all.

Run: python patterns/02_share_a_tensor.py [fork|spawn|forkserver]   (default: spawn)
"""

import sys

import torch
import torch.multiprocessing as mp


def fill_row(rank, shared):
    torch.set_num_threads(1)  # one thread per process: no oversubscription, fork-safe
    shared[rank].fill_(rank + 1)  # in place, into the shared storage; one row per rank: no race


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx, nprocs = mp.get_context(method), 2
    shared = torch.zeros(nprocs, 1000).share_memory_()  # shared before any process starts
    workers = [ctx.Process(target=fill_row, args=(rank, shared)) for rank in range(nprocs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
        if w.exitcode is None:  # still running after its deadline: stop it, then reap it
            w.terminate()
            w.join(timeout=5)
    codes, rows = [w.exitcode for w in workers], shared.mean(dim=1)
    if codes != [0] * nprocs or not torch.equal(rows, torch.arange(1.0, nprocs + 1)):
        sys.exit(f"failed: exit codes {codes}, row means {rows.tolist()}")
    print(f"{method}: {nprocs} processes filled their rows of one shared tensor in place; parent checked")
