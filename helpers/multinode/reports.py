"""Reading notebook 09's results back: the workers' JSON reports, torchrun's error files, a timeline."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
from helpers.multinode.worker import _WORKER_ENV

if TYPE_CHECKING:
    from helpers.multinode.agents import Agent

__all__: list[str] = []  # the public names are imported from helpers.multinode, which re-exports them

# --- reading the results back -------------------------------------------------------------------------


def read_reports(report_dir: str | os.PathLike) -> list[dict]:
    """Every worker report in ``report_dir``, in the order the workers started; numbers as ints.

    Used in [09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = (Path(folder) / "rank1-pid7.json").write_text('{"RANK": "1", "pid": 7}')
    ...     read_reports(folder)
    [{'RANK': 1, 'pid': 7}]
    """
    reports = []
    for path in Path(report_dir).glob("rank*-pid*.json"):
        report = json.loads(path.read_text())
        for name in _WORKER_ENV:
            value = report.get(name)
            if isinstance(value, str) and value.isdigit() and name != "TORCHELASTIC_RUN_ID":
                report[name] = int(value)
        reports.append(report)
    return sorted(reports, key=lambda r: (r.get("started", 0), r.get("RANK", 0)))


def format_reports(reports: Sequence[dict], columns: Sequence[str] = (*_WORKER_ENV, "pid")) -> str:
    """A text table with one row per worker report
    ([09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed)).

    >>> print(format_reports([{"RANK": 0, "pid": 42}], ["RANK", "pid"]))
    RANK  pid
       0   42
    """
    rows = [[str(r.get(c, "")) for c in columns] for r in reports]
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(columns)]
    lines = [
        "  ".join(f"{v:>{w}}" for v, w in zip(row, widths, strict=True)) for row in [list(columns), *rows]
    ]
    return "\n".join(lines)


def error_reports(log_dir: str | os.PathLike) -> list[dict]:
    """The error files that torchelastic's ``record`` wrote under ``log_dir`` (one per failed
    worker and attempt), each as ``{"path": ..., "message": ..., "traceback": ...}``.

    Notebook 09, appendix "No restarts left".

    >>> error_reports("/nonexistent")
    []
    """
    found = []
    for path in sorted(Path(log_dir).glob("*/attempt_*/*/error.json")):
        message = json.loads(path.read_text()).get("message", {})
        if isinstance(message, str):  # a worker that exited without an exception: text only
            message = {"message": message}
        extra = message.get("extraInfo", {})
        found.append(
            {
                "path": str(path.relative_to(log_dir)),
                "message": message.get("message", ""),
                "traceback": extra.get("py_callstack", ""),
            }
        )
    return found


def plot_timeline(reports: Sequence[dict], agents: Sequence[Agent], ax: Axes | None = None) -> Axes:
    """What each worker did when: its agent's rendezvous and start, then the worker itself.

    One row per worker, in start order, times relative to the first agent's launch; each agent's
    exit is a black tick on its workers' rows. A worker without ``finished`` was stopped (a failure,
    a restart): its hatched bar runs until its agent's next worker started, so it spans the failure
    and the new rendezvous too. Used in
    [09 · Training on two nodes, and a worker killed](../notebooks/09_multi_node.ipynb#training-on-two-nodes-and-a-worker-killed).

    >>> import matplotlib.pyplot as plt
    >>> import subprocess
    >>> from helpers.multinode import Agent
    >>> agent = Agent(["x"], subprocess.Popen(["true"]), Path("x"), launched=0.0, ended=3.0)
    >>> r = {"RANK": 0, "GROUP_RANK": 0, "TORCHELASTIC_RESTART_COUNT": 0, "agent_pid": agent.pid,
    ...      "started": 1.0, "finished": 2.5}
    >>> plot_timeline([r], [agent]).get_xlabel()
    's since the first agent started'
    >>> plt.close("all")
    """
    from matplotlib.patches import Patch

    from helpers.plotting import new_figure

    if ax is None:
        _, ax = new_figure("torchrun: what each worker did when", "s since the first agent started")
    origin = min(a.launched for a in agents)
    colors = {"agent: rendezvous, start the worker": "#bbbbbb", "worker: import, join, train": "#1b9e77"}

    def successor(report: dict) -> dict | None:  # the next worker its agent started
        later = [
            r for r in reports if r["agent_pid"] == report["agent_pid"] and r["started"] > report["started"]
        ]
        return min(later, key=lambda r: r["started"], default=None)

    ends = {id(r): r.get("finished") or (successor(r) or r)["started"] for r in reports}
    starts = {id(successor(r)): ends[id(r)] for r in reports if successor(r)}
    labels = []
    for row, report in enumerate(reports):
        agent = next((a for a in agents if a.pid == report.get("agent_pid")), None)
        waited = starts.get(id(report), agent.launched if agent else origin)
        ax.barh(row, report["started"] - waited, left=waited - origin, color="#bbbbbb")
        ax.barh(
            row,
            ends[id(report)] - report["started"],
            left=report["started"] - origin,
            color="#1b9e77",
            hatch=None if "finished" in report else "//",
        )
        if agent and agent.ended is not None:
            ax.plot([agent.ended - origin] * 2, [row - 0.4, row + 0.4], color="black")
        labels.append(
            f"node {report.get('GROUP_RANK')} rank {report.get('RANK')} "
            f"(restart count {report.get('TORCHELASTIC_RESTART_COUNT')})"
        )
    ax.set_yticks(range(len(reports)), labels)
    ax.invert_yaxis()
    legend = [Patch(color=color, label=name) for name, color in colors.items()]
    legend.append(Patch(facecolor="#1b9e77", hatch="//", label="stopped, then a new rendezvous"))
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return ax
