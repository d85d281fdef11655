"""How long a notebook takes to read: markdown words / 200 + code lines / 15, in minutes.

Code lines are the non-blank lines of code cells plus the lines each ``show_source`` listing
displays (docstrings left out, as the notebook shows it) and each ``show_script`` listing. The main
path is every cell before the first heading that starts with "Appendix"; each ``## Appendix: ...``
section is counted on its own.

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
ANCHOR = re.compile(r'<a id="[^"]*"></a>')  # a section's link target: markup, not words to read


@dataclass
class ReadingTime:
    """Minutes to read a notebook's main path and each of its appendices."""

    main: float = 0.0
    appendices: dict[str, float] = field(default_factory=dict)

    @property
    def appendix_total(self) -> float:
        return sum(self.appendices.values())


def _dotted(node: ast.AST) -> str | None:
    """``torch.cuda.is_available`` for that expression; None for anything but a chain of names."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _non_blank(text: str) -> int:
    return len([line for line in text.splitlines() if line.strip()])


def _listing_lines(tree: ast.Module, scope: _Scope, strings: dict[str, str], folder: Path) -> int:
    """Lines displayed by the ``show_source(...)`` (docstrings left out) and ``show_script(...)``
    calls in one cell; ``strings`` holds the notebook's string constants (``PATTERN = "..."``)."""
    lines = 0
    for node in ast.walk(tree):
        scope.bind_imports(node)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    strings[target.id] = node.value.value
        if not (isinstance(node, ast.Call) and node.args):
            continue
        called = scope.resolve(node.func)
        if called == "helpers.source.show_source":
            dotted = scope.resolve(node.args[0]) or _dotted(node.args[0])
            obj = _object(dotted) if dotted else None
            if obj is not None:
                docstring = any(k.arg == "docstring" and getattr(k.value, "value", 0) for k in node.keywords)
                lines += _non_blank(source_text(obj, docstring))
        elif called == "helpers.source.show_script":
            arg = node.args[0]
            name = arg.value if isinstance(arg, ast.Constant) else strings.get(getattr(arg, "id", ""))
            if isinstance(name, str) and (folder / name).is_file():
                lines += _non_blank((folder / name).read_text())
    return lines


def reading_time(path: Path) -> ReadingTime:
    """The reading time of one notebook, main path and appendices."""
    nb = nbformat.read(path, as_version=4)
    scope, strings, result, section = _Scope(), {}, ReadingTime(), None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = APPENDIX.search(cell.source)
            if heading:
                section = cell.source[heading.start() :].splitlines()[0].lstrip("# ").strip()
            minutes = len(ANCHOR.sub("", cell.source).split()) / WORDS_PER_MINUTE
        elif cell.cell_type == "code":
            code = [line for line in cell.source.splitlines() if line.strip()]
            listed = _listing_lines(_cell_tree(cell.source), scope, strings, path.parent)
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
