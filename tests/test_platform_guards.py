"""The Linux-only cells of notebooks 01-04 skip cleanly elsewhere: driven here with the platform faked.

Cells that need ``/proc``, ``/dev/shm``, the ``file_descriptor`` sharing strategy or
``fcntl.F_GETPIPE_SZ`` are guarded by ``helpers.processes.linux_only``. This test finds every use of
those Linux-only names in the notebooks, checks that it sits under such a guard, and runs each
guarded cell with ``sys.platform`` set to ``darwin`` and ``win32``: the cell must print its skip line
and touch nothing Linux-only (its body is not run: every name it would need is missing).
"""

from __future__ import annotations

import ast
import contextlib
import io
import sys
from pathlib import Path

import nbformat
import pytest

from helpers.processes import linux_only

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = [
    ROOT / "notebooks" / name
    for name in (
        "01_start_methods.ipynb",
        "02_shared_tensors.ipynb",
        "03_queues_and_pipes.ipynb",
        "04_fork_and_cuda.ipynb",
    )
]
# Names that only work on Linux (helpers that read /proc or /dev/shm, the file_descriptor probes
# and their results, the pipe-capacity fcntl).
LINUX_ONLY = {
    "memory_region",
    "shared_memory_segments",
    "strategy_footprint",
    "fd_limit_probe",
    "torch_entries_of",
    "F_GETPIPE_SZ",
    "footprint",
    "probes",
}


def _shows_source(statement: ast.stmt) -> bool:
    call = statement.value if isinstance(statement, ast.Expr) else None
    return isinstance(call, ast.Call) and getattr(call.func, "id", None) == "show_source"


def _guarded(statement: ast.stmt) -> bool:
    test = statement.test if isinstance(statement, ast.If) else None
    return isinstance(test, ast.Call) and getattr(test.func, "id", None) == "linux_only"


def _cells(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_linux_only_use_is_guarded(path):
    unguarded = []
    for index, source in enumerate(_cells(path)):
        for statement in ast.parse(source).body:
            used = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
            used |= {n.attr for n in ast.walk(statement) if isinstance(n, ast.Attribute)}
            if used & LINUX_ONLY and not (_guarded(statement) or _shows_source(statement)):
                unguarded.append(f"code cell {index}: {ast.unparse(statement).splitlines()[0]}")
    assert not unguarded, f"Linux-only code outside `if linux_only(...)`: {unguarded}"


@pytest.mark.parametrize("platform", ["darwin", "win32"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_guarded_cells_skip_with_a_message_elsewhere(path, platform, monkeypatch):
    guarded = [s for s in _cells(path) if any(_guarded(st) for st in ast.parse(s).body)]
    if path.name.startswith(("01", "04")):
        assert not guarded  # 01 needs nothing Linux-only; 04 asks `hazard` (GNU OpenMP) instead
        return
    assert guarded, f"{path.name} has Linux-only cells; expected guards"
    monkeypatch.setattr(sys, "platform", platform)
    for source in guarded:
        # Only the guard statements run: the rest of a cell may use the notebook's earlier state.
        tree = ast.Module(body=[st for st in ast.parse(source).body if _guarded(st)], type_ignores=[])
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(compile(tree, path.name, "exec"), {"linux_only": linux_only})  # noqa: S102
        lines = printed.getvalue().splitlines()
        assert lines and all(
            line.startswith("needs Linux (") and line.endswith(f"skipped on {platform}") for line in lines
        ), lines


def test_linux_only_is_true_on_linux_and_silent(monkeypatch, capsys):
    monkeypatch.setattr(sys, "platform", "linux")
    assert linux_only("/proc") is True and capsys.readouterr().out == ""
    monkeypatch.setattr(sys, "platform", "darwin")
    assert linux_only("/proc") is False
    assert capsys.readouterr().out == "needs Linux (/proc): skipped on darwin\n"
