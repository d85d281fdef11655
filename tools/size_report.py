"""Sizes worth a look, printed by ``make test``: guidance for a reviewer, not a gate.

A cap that everything sits on stops separating good from bad, and commits that exist only to fit
under one cost more than they save. So the sizes are reported, largest first, with the guideline
each is read against; CONTRIBUTING.md says what is a rule (a failing test) and what is guidance
(this report). The rules about coupling stay failures (``tests/test_architecture.py``: no import
cycle between helpers modules, few private names imported across them).

    python -m tools.size_report            # the report; exit 0 whatever it finds

Measured from the syntax tree: a function's body is the whole function (its ``def`` line to its last
line) minus its docstring, a nested function counted as its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Guidelines: past one, a module, function or file is probably doing two jobs; split it along them.
MODULE_LINES = 500  # a helpers module
FUNCTION_BODY = 50  # a helpers function, docstring excluded
TEST_FILE_LINES = 600  # a file under tests/
SHOWN = 5  # the largest of each kind, beside any over the guideline

__all__ = ["function_bodies", "report"]


def function_bodies(tree: ast.Module) -> dict[str, int]:
    """``{qualified name: body lines}`` of every function in ``tree``, a nested one as its own.

    >>> function_bodies(ast.parse('def f():\\n    \"\"\"Doc.\"\"\"\\n    return 1\\n'))
    {'f': 2}
    """
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


def _section(title: str, sizes: dict[str, int], guideline: int) -> list[str]:
    ranked = sorted(sizes.items(), key=lambda item: -item[1])
    over = [(name, size) for name, size in ranked if size > guideline]
    shown = over + [item for item in ranked[:SHOWN] if item not in over]
    lines = [f"{title} (guideline {guideline}): {len(over)} over, largest {ranked[0][1] if ranked else 0}"]
    return lines + [f"  {'OVER ' if size > guideline else '     '}{size:5d}  {name}" for name, size in shown]


def report(root: Path = ROOT) -> str:
    """The report as text: helpers modules, helpers functions, test files."""
    modules = {
        str(p.relative_to(root)): len(p.read_text().splitlines()) for p in (root / "helpers").rglob("*.py")
    }
    functions = {
        f"{p.relative_to(root)}:{name}": size
        for p in (root / "helpers").rglob("*.py")
        for name, size in function_bodies(ast.parse(p.read_text())).items()
    }
    tests = {
        str(p.relative_to(root)): len(p.read_text().splitlines()) for p in (root / "tests").rglob("*.py")
    }
    return "\n".join(
        _section("helpers modules, lines", modules, MODULE_LINES)
        + _section("helpers functions, body lines", functions, FUNCTION_BODY)
        + _section("test files, lines", tests, TEST_FILE_LINES)
    )


if __name__ == "__main__":
    print(report())
