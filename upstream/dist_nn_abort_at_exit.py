"""A gloo rank that called destroy_process_group() can still abort at exit (SIGABRT) when
torch.distributed.nn is first imported after init_process_group, as the first DDP(model) does.

Why (torch/distributed/nn/functional.py): its functions take ``group=group.WORLD`` as a default
argument, evaluated once, at import. Imported after init_process_group, that default is the live
group: destroy_process_group() cannot free it, its gloo threads run on, and at interpreter exit one
may still hold the last all-reduce's work (a Python object), whose release needs the GIL of an
interpreter that is shutting down: "terminate called without an active exception", SIGABRT.
Importing torch.distributed.nn before init_process_group avoids it (its defaults are then None).

Plain torch, CPU only. Each run is one two-rank job (mp.spawn, gloo on 127.0.0.1) whose ranks
build DDP(Linear(4, 1)), train a few steps and destroy the group, all without error.

    python dist_nn_abort_at_exit.py [RUNS] [--import-first]

Prints the torch version, one character per job (. both ranks exited 0, A a rank aborted, x any
other failure), then a verdict line: "AFFECTED: ..." and exit code 1 where a rank aborted, "...
not affected" and exit code 0 where none did, exit code 2 on any other failure. The abort is rare:
with torch 2.15.0 on a loaded 2-core machine, 12 of 325 jobs of a similar DDP program (two at a
time); this script saw 0 of 53 without the early import and 0 of 52 with it (four jobs at a time,
load 13-30). So the default of 2 jobs, kept short for a test run, seldom shows it: pass 300.
"""

import os
import platform
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, port, import_first):
    torch.set_num_threads(1)
    if import_first:
        from torch.distributed import nn  # noqa: F401  before the group exists: it binds nothing
    dist.init_process_group(
        "gloo", f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=60)
    )
    try:
        before = "torch.distributed.nn" in sys.modules
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
        assert import_first or (not before and "torch.distributed.nn" in sys.modules), "DDP imported it"
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(5):
            optimizer.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()  # gloo all-reduces the gradients
            optimizer.step()
    finally:
        dist.destroy_process_group()  # done right: the rank then returns and its process exits


def one_job(import_first, deadline_s=600.0):
    """None if both ranks exited 0, else what went wrong (a signal name or an error line)."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    job = mp.start_processes(rank_main, (port, import_first), nprocs=2, join=False, start_method="spawn")
    start = time.monotonic()
    try:
        while not job.join(timeout=5):
            if time.monotonic() - start > deadline_s:
                return f"no exit after {deadline_s:.0f} s"
    except mp.ProcessExitedException as error:
        return error.signal_name or f"exit code {error.exit_code}"
    except mp.ProcessRaisedException as error:
        return str(error).strip().splitlines()[-1]
    finally:
        for process in job.processes:
            if process.is_alive():
                process.kill()
            process.join(timeout=10)
        for name in job.error_files:  # written only by a rank that raised; torch never deletes them
            if os.path.exists(name):
                os.remove(name)
    return None


if __name__ == "__main__":
    runs = int(next((a for a in sys.argv[1:] if a.isdigit()), 2))
    import_first = "--import-first" in sys.argv
    print(f"torch {torch.__version__}, Python {platform.python_version()}, {platform.platform()}")
    when = "before init_process_group" if import_first else "after it, by the first DDP(model)"
    print(f"{runs} two-rank gloo jobs; torch.distributed.nn imported {when}", flush=True)
    failures = []
    for _ in range(runs):
        failures.append(one_job(import_first))
        if failures[-1] not in (None, "SIGABRT"):
            print(f"\nrun {len(failures)}: {failures[-1]}", file=sys.stderr, flush=True)
        print({None: ".", "SIGABRT": "A"}.get(failures[-1], "x"), end="", flush=True)
    print()
    aborts = sum(f == "SIGABRT" for f in failures)
    others = [f for f in failures if f not in (None, "SIGABRT")]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{runs} jobs: {aborts} aborted at exit, {len(others)} other failures; load average {load}")
    if others:
        print(f"the reproduction itself failed: {others}", file=sys.stderr)
        sys.exit(2)
    if aborts:
        print(f"AFFECTED: in {aborts} of {runs} jobs a rank aborted at exit (SIGABRT) after training")
        sys.exit(1)
    print(f"no abort in {runs} jobs (it is rare: run 300 to look for it): not affected")
