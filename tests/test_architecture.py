"""The shape of ``helpers``: no import cycle between its modules, and no module too long to read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "helpers"
MODULES = {
    ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
    for path in sorted(HELPERS.rglob("*.py"))
}
MAX_LINES = 500


def _imported(importer: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The ``helpers`` modules one import statement runs (``helpers`` uses absolute imports only).

    Importing ``helpers.a.b`` runs the package ``helpers.a`` first (its ``__init__``), unless the
    importer is inside that package, whose ``__init__`` is already running or done.
    """
    assert not getattr(node, "level", 0), "helpers imports are absolute: from helpers.x import y"
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    packages = {".".join(t.split(".")[:n]) for t in targets for n in range(2, t.count(".") + 1)}
    inside = {p for p in packages if importer == p or importer.startswith(p + ".")}
    return {target for target in [*targets, *packages] if target in MODULES} - inside


def import_graph() -> dict[str, set[str]]:
    """Each ``helpers`` module and the ``helpers`` modules it imports anywhere in its source."""
    graph = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        graph[name] = set().union(*(_imported(name, n) for n in nodes)) - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in ``graph`` as a list of modules (first == last), or None (depth-first search)."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, nxt])):
                return cycle
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_graph_sees_function_level_imports():
    graph = import_graph()
    assert "helpers.processes" in graph["helpers.launch"]  # a module-level import
    assert "helpers.ddp" in graph["helpers.multinode.worker"]  # imported inside a function only


def test_importing_a_packages_module_runs_the_package_unless_the_importer_is_inside():
    statement = ast.parse("from helpers.cuda.demos import gpu_info").body[0]
    assert _imported("helpers.launch", statement) == {"helpers.cuda", "helpers.cuda.demos"}
    assert _imported("helpers.cuda.cli", statement) == {"helpers.cuda.demos"}


def test_no_import_cycle_between_helpers_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_helpers_module_is_over_500_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by job (at most {MAX_LINES})"
