"""The coupling of ``helpers``: no import cycle between helpers modules, and few private names imported
across them. Sizes (modules, functions, test files) are guidance, reported by ``tools/size_report.py``
in ``make test``, not failures here.

A private cross-module import is ``from helpers.x import _name`` inside a helpers module other than
``helpers.x``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tools.size_report import _section as report_section
from tools.size_report import function_bodies

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "helpers"
MODULES = {
    ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
    for path in sorted(HELPERS.rglob("*.py"))
}
MAX_PRIVATE_IMPORTS = 20  # `from helpers.x import _name` across helpers modules


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


def private_imports(name: str, tree: ast.Module) -> list[str]:
    """``from helpers.x import _y`` statements of module ``name`` with ``helpers.x`` another module,
    as ``"name <- helpers.x._y"``."""
    return [
        f"{name} <- {node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("helpers")
        and node.module != name
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


def test_the_measures_see_what_they_count():
    source = 'def f():\n    """Doc\n    more."""\n    x = 1\n\n    return x\n'
    source += "class C:\n    def m(self):\n        pass\n"
    assert function_bodies(ast.parse(source)) == {"f": 4, "C.m": 2}  # def line, body and blank lines
    assert report_section("sizes", {"big": 3, "small": 1}, 2)[1:] == [
        "  OVER     3  big",
        "           1  small",
    ]
    statement = "from helpers.a import _b, c\nfrom helpers.x import _own\nfrom os import _exit\n"
    assert private_imports("helpers.x", ast.parse(statement)) == ["helpers.x <- helpers.a._b"]


def test_few_private_names_are_imported_across_helpers_modules():
    found = [
        line for name, path in MODULES.items() for line in private_imports(name, ast.parse(path.read_text()))
    ]
    assert len(found) <= MAX_PRIVATE_IMPORTS, (
        f"{len(found)} private cross-module imports in helpers (at most {MAX_PRIVATE_IMPORTS}): make a "
        "shared helper public in one place (__all__, docstring example, type hints) or merge the modules:\n  "
        + "\n  ".join(found)
    )
