"""How long a notebook takes to read: markdown words / 200 + code lines / 15, in minutes.

Code lines are the non-blank lines of code cells plus the lines each ``show_source`` listing
displays (docstrings left out, as the notebook shows it). The main path is every cell before the
first heading that starts with "Appendix"; each ``## Appendix: ...`` section is counted on its own.

``python -m tests.reading_time`` prints the figures of every notebook.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from helpers.source import source_text
from tests.test_shown_code import _cell_tree, _object, _Scope

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 15
APPENDIX = re.compile(r"^#+\s+Appendix\b", re.MULTILINE)


@dataclass
class ReadingTime:
    """Minutes to read a notebook's main path and each of its appendices."""

    main: float = 0.0
    appendices: dict[str, float] = field(default_factory=dict)

    @property
    def appendix_total(self) -> float:
        return sum(self.appendices.values())


def _listing_lines(tree: ast.Module, scope: _Scope) -> int:
    """Lines displayed by the ``show_source(...)`` calls in one cell (their docstrings left out)."""
    lines = 0
    for node in ast.walk(tree):
        scope.bind_imports(node)
        if isinstance(node, ast.Call) and scope.resolve(node.func) == "helpers.source.show_source":
            dotted = scope.resolve(node.args[0]) if node.args else None
            obj = _object(dotted) if dotted else None
            if obj is not None:
                docstring = any(k.arg == "docstring" and getattr(k.value, "value", 0) for k in node.keywords)
                lines += len([line for line in source_text(obj, docstring).splitlines() if line.strip()])
    return lines


def reading_time(path: Path) -> ReadingTime:
    """The reading time of one notebook, main path and appendices."""
    nb = nbformat.read(path, as_version=4)
    scope, result, section = _Scope(), ReadingTime(), None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = APPENDIX.search(cell.source)
            if heading:
                section = cell.source[heading.start() :].splitlines()[0].lstrip("# ").strip()
            minutes = len(cell.source.split()) / WORDS_PER_MINUTE
        elif cell.cell_type == "code":
            code = [line for line in cell.source.splitlines() if line.strip()]
            listed = _listing_lines(_cell_tree(cell.source), scope)
            minutes = (len(code) + listed) / CODE_LINES_PER_MINUTE
        else:
            continue
        if section is None:
            result.main += minutes
        else:
            result.appendices[section] = result.appendices.get(section, 0.0) + minutes
    return result


def main() -> None:
    print(f"{'notebook':34} {'main path':>9} {'appendices':>10}")
    for path in NOTEBOOKS:
        times = reading_time(path)
        print(f"{path.name:34} {times.main:8.1f}m {times.appendix_total:9.1f}m")


if __name__ == "__main__":
    sys.exit(main())
