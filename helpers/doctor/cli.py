"""``python -m helpers.doctor``: the findings as a table or JSON, or a stuck job's report."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Sequence

from helpers.doctor.checks import check, format_findings
from helpers.doctor.findings import CHECKS, DEFAULT_SHM_NEED, DoctorError
from helpers.doctor.inspector import format_inspection, inspect

__all__: list[str] = []  # the public names are imported from helpers.doctor, which re-exports them

# --- The command line -------------------------------------------------------------------------------


def _bytes(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 2G)")
    return int(float(match.group(1)) * 1024 ** " kmgt".index(match.group(2) or " "))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the usage too)
        raise DoctorError(message)


def _parser() -> _Parser:
    """The command line's options (``--help`` lists them)."""
    parser = _Parser(
        prog="python -m helpers.doctor",
        description=(
            "The doctor: check a machine and a launch target before anything starts, and inspect a stuck job."
        ),
        epilog=f"checks: {', '.join(CHECKS)}. Exit code 1 when a check fails, 2 for bad input.",
    )
    parser.add_argument("--target", help="the worker, as module:function")
    parser.add_argument("--pid", type=int, help="run the per-process checks against this running process")
    parser.add_argument("--inspect", type=int, metavar="PID", help="report a stuck job's process tree")
    parser.add_argument("--nprocs", type=int, default=1, help="how many worker processes the job starts")
    parser.add_argument(
        "--shm-need",
        type=_bytes,
        default=DEFAULT_SHM_NEED,
        help="shared memory the job needs, e.g. 2G (default 512M)",
    )
    parser.add_argument(
        "--mem-need", type=_bytes, help="memory the whole job needs, e.g. 8G (default: nprocs x 1G)"
    )
    parser.add_argument("--shm-path", default="/dev/shm", help="where shared memory lives (default /dev/shm)")
    parser.add_argument("--master-addr", help="the rendezvous host (default: $MASTER_ADDR)")
    parser.add_argument(
        "--master-port", type=int, help="the rendezvous port (default: $MASTER_PORT, else 29500; 29400 too)"
    )
    parser.add_argument(
        "--imports", default="", help="comma-separated modules: does importing them initialise CUDA?"
    )
    parser.add_argument(
        "--shared-tensors",
        type=int,
        help="shared tensors one process holds at once (default: a DataLoader's 64)",
    )
    parser.add_argument("--nnodes", type=int, default=1, help="how many machines the job spans (default 1)")
    parser.add_argument(
        "--nproc-per-node",
        type=int,
        help="torchrun's --nproc-per-node: workers each torchrun agent starts (compared with Slurm's layout)",
    )
    parser.add_argument("--backend", help="the backend the job uses, e.g. nccl, gloo or cpu:gloo,cuda:nccl")
    parser.add_argument("--only", action="append", help="run only this check (repeatable)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds for each probe (default 30)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--brief", action="store_true", help="the table only, no explanations")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m helpers.doctor``: print the findings (or ``--inspect PID``); 1 if a check fails.

    Bad input prints one line and returns 2, never a traceback.

    >>> main(["--target", "no_such_module:fn", "--only", "target importable"])  # the line goes to stderr
    2
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        if args.inspect is not None:
            reports = inspect(args.inspect, timeout=args.timeout)
            print(
                json.dumps([dataclasses.asdict(r) for r in reports], indent=1)
                if args.json
                else format_inspection(reports)
            )
            return 0
        findings = check(
            args.target,
            pid=args.pid,
            this_process=False,
            processes=args.nprocs,
            shm_path=args.shm_path,
            shm_need=args.shm_need,
            mem_need=args.mem_need,
            master_addr=args.master_addr,
            master_port=args.master_port,
            imports=[m for m in args.imports.split(",") if m.strip()],
            shared_tensors=args.shared_tensors,
            nodes=args.nnodes,
            nproc_per_node=args.nproc_per_node,
            backend=args.backend,
            only=args.only,
            timeout=args.timeout,
        )
    except DoctorError as error:
        print(f"doctor: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([dataclasses.asdict(f) for f in findings], indent=1))
    else:
        print(format_findings(findings, details=not args.brief))
    return 1 if any(f.status == "fail" for f in findings) else 0
