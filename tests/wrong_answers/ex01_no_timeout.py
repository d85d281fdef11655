"""Wrong: joins without a timeout, so a stuck process blocks the parent for ever."""

import torch.multiprocessing as mp


def run_workers(target, args=(), nprocs=2, method="spawn", timeout=30.0):
    ctx = mp.get_context(method)
    procs = [ctx.Process(target=target, args=(rank, *args)) for rank in range(nprocs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return [p.exitcode for p in procs]
