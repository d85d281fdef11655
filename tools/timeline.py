"""Where a test run's time went, from the file ``PYTEST_TIMELINE=FILE`` makes conftest.py write.

    PYTEST_TIMELINE=/tmp/t.tsv make test; python -m tools.timeline /tmp/t.tsv [--top 25]

Prints each xdist worker's span (its first test's start to its last test's end, from the run's
first start) and how long it sat idle at the end while another still ran; the modules by wall time
(the sum of their tests' durations: what ``--dist loadscope`` gives one worker) with their CPU
seconds (the test process's own and its children's that it waited for: JupyterLab's kernels and
Chromium count when their server or browser is reaped, on a browser module's last test); and the
tests that took most CPU.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path


def read(path: Path) -> list[tuple[str, float, float, float, float, str]]:
    rows = []
    for line in path.read_text().splitlines():
        worker, start, end, own, children, nodeid = line.split("\t", 5)
        rows.append((worker, float(start), float(end), float(own), float(children), nodeid))
    return rows


def report(rows: list[tuple[str, float, float, float, float, str]], top: int = 25) -> str:
    t0 = min(r[1] for r in rows)
    last = max(r[2] for r in rows) - t0
    out = [f"{len(rows)} tests; first start to last end {last:.0f} s"]
    spans: dict[str, list[float]] = defaultdict(lambda: [float("inf"), 0.0, 0.0])
    for worker, start, end, *_ in rows:
        span = spans[worker]
        span[0], span[1], span[2] = min(span[0], start - t0), max(span[1], end - t0), span[2] + end - start
    for worker, (first, final, busy) in sorted(spans.items()):
        out.append(
            f"  {worker}: {first:5.0f} to {final:5.0f} s, in tests {busy:5.0f} s, idle at the end {last - final:4.0f} s"
        )
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for _, start, end, own, children, nodeid in rows:
        module = modules[nodeid.split("::")[0]]
        module[0], module[1], module[2] = module[0] + end - start, module[1] + own + children, module[2] + 1
    out.append(f"modules by wall time (top {top}): wall s, CPU s, tests")
    for name, (wall, cpu, count) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]:
        out.append(f"  {wall:7.0f} {cpu:7.0f} {count:5d}  {name}")
    out.append(f"tests by CPU (top {top}): CPU s (own + children), wall s")
    for _, start, end, own, children, nodeid in sorted(rows, key=lambda r: -(r[3] + r[4]))[:top]:
        out.append(f"  {own + children:7.1f} {end - start:7.1f}  {nodeid}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    print(report(read(args.file), args.top))


if __name__ == "__main__":
    main()
