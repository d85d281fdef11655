"""``python -m helpers.cuda [DEMO ...]``: run notebook 04's GPU demos and print their transcript."""

from __future__ import annotations

import argparse
import sys

import torch

from helpers.cuda.demos import GPU_DEMOS, cuda_present, gpu_check_exit_code, gpu_info, run_gpu_demos
from helpers.cuda_transcript import format_transcript

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.cuda [DEMO ...]``: run GPU demos, each in a fresh interpreter; print them.
    The command line for the GPU demos of
    [04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda) (shown there and in
    docs/instructors.md).

    Not run as a doctest: a CLI entry point that needs a CUDA device and takes minutes.

    >>> main(["poison_table", "--check"])  # doctest: +SKIP
    0
    """
    parser = argparse.ArgumentParser(
        prog="python -m helpers.cuda",
        description="Run notebook 04's GPU demos (fork after CUDA init, which calls poison fork, the "
        "fixes, CUDA tensors through a queue, one device per process), each in a fresh interpreter "
        "with a timeout, and print what happened. helpers.cuda_transcript records them to a file.",
    )
    demos = [demo.__name__ for demo in GPU_DEMOS]
    parser.add_argument("demos", nargs="*", metavar="DEMO", help=f"any of {', '.join(demos)} (default: all)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per child (default 120)")
    parser.add_argument("--check", action="store_true", help="also assert the robust claims (exit 1 if not)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.demos) - set(demos))
    if unknown:
        parser.error(f"unknown demo(s) {unknown}; choose from {demos}")
    if not cuda_present():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        print(f"No CUDA device found (torch {torch.__version__}, {build}): nothing to run.")
        return 0
    results = run_gpu_demos(timeout=args.timeout, progress=sys.stderr, names=tuple(args.demos))
    print(format_transcript(gpu_info(), results), end="")
    return gpu_check_exit_code(results) if args.check else 0
