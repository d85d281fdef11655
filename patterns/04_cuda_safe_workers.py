"""Start workers that may use CUDA: the parent never touches CUDA, each worker picks its own device.
Run: python 04_cuda_safe_workers.py [spawn|forkserver|fork]  (under fork the workers stay on the CPU)"""

import sys

import torch
import torch.multiprocessing as mp


def worker(rank, may_use_cuda, results):  # may_use_cuda: False in a fork child, which never uses CUDA
    torch.set_num_threads(1)  # one CPU thread per worker (and no OpenMP hang in a fork child)
    cuda = may_use_cuda and torch.cuda.is_available()  # asked here, in the child, never in the parent
    if cuda:
        torch.cuda.set_device(rank % torch.cuda.device_count())  # this worker's GPU, before any op
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    results.put((rank, str(device), torch.ones(1000, device=device).sum().item()))


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx = mp.get_context(method)  # no torch.cuda call before this point, not even is_available()
    results = ctx.Queue()
    workers = [ctx.Process(target=worker, args=(r, method != "fork", results), daemon=True) for r in range(2)]
    for w in workers:
        w.start()
    outcomes = sorted(results.get(timeout=120) for _ in workers)  # get before join
    for w in workers:
        w.join(timeout=30)
        if w.exitcode is None:  # still running after its deadline: stop it, then reap it
            w.terminate()
            w.join(timeout=5)
    if [w.exitcode for w in workers] != [0, 0]:
        sys.exit(f"a worker failed: exit codes {[w.exitcode for w in workers]}")
    print(f"{method}: " + ", ".join(f"worker {r} used {d} (sum {s:.0f})" for r, d, s in outcomes))
