"""Time, bytes and memory per rank of DDP, DDP by hand, ZeRO-1 and FSDP2 on this machine (notebook 12 §5).

    python scripts/bench_sharding.py [--sizes 256,256 1024,1024] [--repeats 5] [--steps 10] [--ranks 2]

One ``mp.spawn`` of ``--ranks`` gloo ranks on CPU (one thread each) trains the digits MLP of each
size with every method, ``--repeats`` times, ``--steps`` Adam steps each
(``helpers.sharding.benchmark_rank``), and prints one row per method and size: the median time per
step (the first step of a run left out); the bytes rank 0 sent in its last step, measured (``wchar``
of ``/proc/self/io``: Linux only, blank elsewhere) beside two models computed from the method's
collectives, a ring (NCCL's algorithm) and gloo's (whose reduce-scatter is an all-reduce); and the
bytes of the tensors rank 0 holds (parameters, gradients, optimizer state, DDP's buckets). The
process's resident memory is left
out: one process runs every method in turn, and what one frees the next reuses (notebook 12 §1
measures it with a launch per method). The load average is printed before and after: timings on a
shared machine move with it. Nothing is written outside a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.multiprocessing as mp

from helpers import sharding
from helpers.ddp import free_port

COLUMNS = ("method", "params", "ms/step", "MB sent", "MB ring model", "MB gloo model", "MB params", "MB grads",
           "MB optim", "MB buckets", "MB held")  # fmt: skip
"""The table's header: one row per method and model size."""

BENCH_METHODS = ("ddp", "ddp_by_hand", "zero1", "fsdp2")
"""The rows the issue asks for; ``--methods`` adds ``zero_redundancy``."""


def table(rows: list[dict], world_size: int) -> list[list[str]]:
    """One line per (method, parameters): medians over the repeats, rank 0's bytes in MB (10^6)."""
    lines = []
    for key in dict.fromkeys((r["method"], r["parameters"]) for r in rows):
        runs = [r for r in rows if (r["method"], r["parameters"]) == key]
        memory, sent = runs[0]["memory"], runs[0]["bytes"]
        kinds = [memory[kind] for kind in ("parameters", "gradients", "optimizer", "buckets")]
        megabytes = [sent["sent"], sent["ring"], sent["gloo"], *kinds, sum(kinds)]
        ms = 1000 * statistics.median(r["seconds_per_step"] for r in runs)
        cells = ["" if b is None else f"{b / 1e6:.2f}" for b in megabytes]  # no /proc: nothing measured
        lines.append([key[0], f"{key[1]:,}", f"{ms:.1f}", *cells])
    return lines


def main(argv: list[str] | None = None) -> list[list[str]]:
    """Run the benchmark and print its table; returns the table's rows (without the header)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["256,256", "1024,1024"], help="hidden widths")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--methods", nargs="+", default=list(BENCH_METHODS), choices=sharding.METHODS)
    args = parser.parse_args(argv)
    sizes = [tuple(int(w) for w in size.split(",")) for size in args.sizes]
    print(
        f"torch {torch.__version__}, {os.cpu_count()} CPUs, {args.ranks} ranks x 1 thread, gloo, "
        f"{args.repeats} runs of {args.steps} steps; load average before {os.getloadavg()[0]:.1f}"
    )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tmp-bench-sharding-") as folder:
        path = os.path.join(folder, "rows.pt")
        spawn_args = (args.ranks, free_port(), path, sizes, args.repeats, args.steps, args.methods)
        mp.spawn(sharding.benchmark_rank, args=spawn_args, nprocs=args.ranks)
        rows = torch.load(path, weights_only=True)
    lines = table(rows, args.ranks)
    widths = [max(len(c), *(len(line[i]) for line in lines)) for i, c in enumerate(COLUMNS)]
    for line in [list(COLUMNS), *lines]:
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=True)))
    print(f"{time.perf_counter() - start:.0f} s in all; load average after {os.getloadavg()[0]:.1f}")
    return lines


if __name__ == "__main__":
    main()
