"""Start N processes with a chosen start method, join each with a timeout, check the exit codes.
Run: python 01_start_a_process.py [fork|spawn|forkserver]   (default: spawn)"""

import os
import sys

import torch
import torch.multiprocessing as mp


def work(rank):  # top level of a module: a spawn/forkserver child imports it by name
    torch.set_num_threads(1)  # one thread per process: no oversubscription, fork-safe
    x = torch.randn(200, 200)
    print(f"rank {rank} (pid {os.getpid()}): {float((x @ x).trace()):.1f}", flush=True)


if __name__ == "__main__":  # a spawn/forkserver child imports this file: start nothing then
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx = mp.get_context(method)  # never mp.set_start_method: one method, said here
    procs = [ctx.Process(target=work, args=(rank,)) for rank in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        if p.exitcode is None:  # still running after its deadline: stop it, then reap it
            p.terminate()
            p.join(timeout=5)
    codes = [p.exitcode for p in procs]
    print(f"{method}: {len(procs)} processes, exit codes {codes}")
    sys.exit(0 if codes == [0] * len(procs) else 1)
