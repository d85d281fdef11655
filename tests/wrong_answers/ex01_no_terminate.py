"""Wrong: joins with a timeout but leaves a stuck process running."""

import torch.multiprocessing as mp


def run_workers(target, args=(), nprocs=2, method="spawn", timeout=30.0):
    ctx = mp.get_context(method)
    procs = [ctx.Process(target=target, args=(rank, *args)) for rank in range(nprocs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=timeout)
    return [p.exitcode for p in procs]
