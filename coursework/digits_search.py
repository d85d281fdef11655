"""Sample assignment: a learning-rate search on digits, one spawn process per learning rate.

Run from anywhere (the package is installed)::

    python -m helpers.coursework.digits_search                     # default grid
    python -m helpers.coursework.digits_search --lrs 0.05,0.5 --epochs 3

It trains one small MLP per learning rate, each in its own process started with the *spawn* start
method (explicitly, whatever the platform's default), collects the results in the parent, prints a
table and the best learning rate, and compares the wall time with running the same jobs one after
the other in this process. See coursework/README.md for the tasks and the grading.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time

import torch
from helpers.coursework.digits_workers import train_digits

from helpers.launch import launch

METHOD = "spawn"  # the assignment's point: code that works under spawn works everywhere


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lrs", default="0.01,0.1,0.5", help="comma-separated learning rates")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for the whole parallel run")
    parser.add_argument("--no-sequential", action="store_true", help="skip the one-process comparison")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    lrs = [float(lr) for lr in args.lrs.split(",")]
    print(
        f"torch {torch.__version__}; default start method here: {mp.get_start_method()}; workers use {METHOD}"
    )

    start = time.perf_counter()
    # launch uses mp.get_context(METHOD): one process per learning rate, bounded by --timeout.
    results = launch(
        train_digits, args=(lrs, args.epochs, args.seed), nprocs=len(lrs), method=METHOD, timeout=args.timeout
    )
    parallel = time.perf_counter() - start

    print(f"{'lr':>8} {'accuracy':>9} {'seconds':>8} {'pid':>8}")
    for r in results:
        print(f"{r['lr']:>8g} {r['accuracy']:>9.3f} {r['seconds']:>8.2f} {r['pid']:>8}")
    best = max(results, key=lambda r: r["accuracy"])
    print(f"best learning rate: {best['lr']:g} (test accuracy {best['accuracy']:.3f})")
    print(f"parallel wall time ({len(lrs)} {METHOD} processes, start-up included): {parallel:.2f} s")

    if not args.no_sequential:
        start = time.perf_counter()
        for rank in range(len(lrs)):
            train_digits(rank, lrs, args.epochs, args.seed)
        sequential = time.perf_counter() - start
        print(
            f"sequential wall time (one process): {sequential:.2f} s; speed-up {sequential / parallel:.2f}x"
        )
    return 0


if __name__ == "__main__":  # required under spawn: children import this module and must not re-run main()
    raise SystemExit(main())
