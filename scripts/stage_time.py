"""Time the stages of `make test` and print them at the end, so the next slowdown shows where it is.

    python scripts/stage_time.py FILE NAME COMMAND...   # run COMMAND; append NAME's times to FILE
    python scripts/stage_time.py FILE --report          # print FILE as a table, then remove it

Each stage records its wall time, the CPU time (user + system) of COMMAND and of every descendant
that was waited for (pytest's workers, notebook kernels, the processes tests start), and the
1-minute load average before and after: on a shared machine, wall time alone says little. When
COMMAND fails, the table so far is printed and its exit status returned. Standard library only:
it times the install stage too, before the virtual environment exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def run(file: Path, name: str, command: list[str]) -> int:
    before, load, start = os.times(), _load(), time.monotonic()
    status = subprocess.call(command)
    after, wall = os.times(), time.monotonic() - start
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    file.parent.mkdir(parents=True, exist_ok=True)
    with file.open("a") as out:
        out.write(f"{name}\t{wall:.1f}\t{cpu:.1f}\t{load:.2f}\t{_load():.2f}\t{status}\n")
    if status != 0:
        report(file)
    return status


def report(file: Path) -> None:
    if not file.exists():
        return
    rows = [line.split("\t") for line in file.read_text().splitlines() if line]
    print(f"\n{'stage':<22}{'wall s':>8}{'CPU s':>8}  load before -> after")
    for name, wall, cpu, load_before, load_after, status in rows:
        failed = "" if status == "0" else f"  (failed: exit {status})"
        print(f"{name:<22}{wall:>8}{cpu:>8}  {load_before} -> {load_after}{failed}")
    total_wall = sum(float(r[1]) for r in rows)
    total_cpu = sum(float(r[2]) for r in rows)
    print(f"{'total':<22}{total_wall:>8.1f}{total_cpu:>8.1f}  ({os.cpu_count()} CPUs)")
    file.unlink()


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[1] == "--report":
        report(Path(argv[0]))
        return 0
    if len(argv) < 3:
        print(__doc__)
        return 2
    return run(Path(argv[0]), argv[1], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
