"""Wrong: calls the target in the parent instead of starting processes."""


def run_workers(target, args=(), nprocs=2, method="spawn", timeout=30.0):
    for rank in range(nprocs):
        target(rank, *args)
    return [0] * nprocs
