"""Wrong: joins each process right after starting it, so they run one after another."""

import torch.multiprocessing as mp


def run_workers(target, args=(), nprocs=2, method="spawn", timeout=30.0):
    ctx = mp.get_context(method)
    procs = []
    for rank in range(nprocs):
        p = ctx.Process(target=target, args=(rank, *args))
        p.start()
        p.join(timeout=timeout)
        if p.exitcode is None:
            p.terminate()
            p.join(timeout=5)
        procs.append(p)
    return [p.exitcode for p in procs]
