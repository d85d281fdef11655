"""The shape of ``helpers`` and ``tests``: no import cycle between helpers modules, no module, function or
test file too long to read, and few private names imported across helpers modules.

Measured from the syntax tree: a function's body is the whole function (its ``def`` line to its last
line) minus its docstring, a nested function counted as its own; a private cross-module import is
``from helpers.x import _name`` inside a helpers module other than ``helpers.x``.
"""

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
MAX_BODY = 50  # lines in a helpers function, docstring excluded
MAX_PRIVATE_IMPORTS = 20  # `from helpers.x import _name` across helpers modules
MAX_TEST_FILE = 600  # lines in any tests/**/*.py (tests/wrong_answers included)
TEST_FILES = sorted((ROOT / "tests").rglob("*.py"))


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


def function_bodies(tree: ast.Module) -> dict[str, int]:
    """``{qualified name: body lines}`` of every function in ``tree``, a nested one as its own."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = set(range(child.lineno, child.end_lineno + 1))
                body = child.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    if isinstance(body[0].value.value, str):
                        lines -= set(range(body[0].lineno, body[0].end_lineno + 1))
                for inner in ast.walk(child):
                    if inner is not child and isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                        first = min([d.lineno for d in inner.decorator_list] + [inner.lineno])
                        lines -= set(range(first, inner.end_lineno + 1))
                found[prefix + child.name] = len(lines)
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, f"{prefix}{child.name}." if isinstance(child, ast.ClassDef) else prefix)

    visit(tree, "")
    return found


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
    statement = "from helpers.a import _b, c\nfrom helpers.x import _own\nfrom os import _exit\n"
    assert private_imports("helpers.x", ast.parse(statement)) == ["helpers.x <- helpers.a._b"]


def test_no_helpers_function_has_a_body_over_50_lines():
    over = [
        f"{name}.{function}: {lines}"
        for name, path in MODULES.items()
        for function, lines in function_bodies(ast.parse(path.read_text())).items()
        if lines > MAX_BODY
    ]
    assert not over, f"functions over {MAX_BODY} lines (docstring excluded); split them by job: {over}"


def test_few_private_names_are_imported_across_helpers_modules():
    found = [
        line for name, path in MODULES.items() for line in private_imports(name, ast.parse(path.read_text()))
    ]
    assert len(found) <= MAX_PRIVATE_IMPORTS, (
        f"{len(found)} private cross-module imports in helpers (at most {MAX_PRIVATE_IMPORTS}): make a "
        "shared helper public in one place (__all__, docstring example, type hints) or merge the modules:\n  "
        + "\n  ".join(found)
    )


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_test_file_is_over_600_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_TEST_FILE, (
        f"{path.relative_to(ROOT)} has {lines} lines (at most {MAX_TEST_FILE}): split it along what it "
        "tests, shared fixtures in one support module"
    )
