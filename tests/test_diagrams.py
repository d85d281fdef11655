"""Every notebook draws the mechanism it teaches: a Mermaid diagram in a markdown cell of its main path.

A diagram is a fenced block in a markdown cell, ```` ```mermaid ```` ... ```` ``` ````, before the
first ``Appendix`` heading. Its first line names a Mermaid diagram type (``flowchart LR``,
``sequenceDiagram``, ...). JupyterLab draws such a block (the browser test counts the drawn
diagrams, tests/e2e/test_jupyterlab_browser.py) and so does the static site (tests/test_build_site.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.reading_time import APPENDIX

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FENCE = re.compile(r"^ {0,3}```mermaid[ \t]*\n(.*?)^ {0,3}```[ \t]*$", re.MULTILINE | re.DOTALL)
DIAGRAM_TYPES = (
    "flowchart",
    "graph",
    "sequenceDiagram",
    "stateDiagram",
    "stateDiagram-v2",
    "classDiagram",
    "timeline",
    "gantt",
    "block-beta",
)

# Notebooks that do not draw their mechanism yet; each leaves the set when it does (strict: a notebook
# listed here that already passes fails the test, so the set cannot go stale).
NOT_YET_DRAWN = {}


def mermaid_blocks(nb, main_path_only: bool = False) -> list[str]:
    """The Mermaid diagrams of a notebook's markdown cells (of its main path only, if asked).

    >>> cell = nbformat.v4.new_markdown_cell("Text\\n\\n```mermaid\\nflowchart LR\\n  A --> B\\n```\\n")
    >>> mermaid_blocks(nbformat.v4.new_notebook(cells=[cell]))
    ['flowchart LR\\n  A --> B\\n']
    """
    blocks = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        if main_path_only and APPENDIX.search(cell.source):
            break
        blocks += FENCE.findall(cell.source)
    return blocks


def diagram_findings(path: Path) -> list[str]:
    """Why a notebook's main path does not draw a diagram; empty when it does."""
    nb = nbformat.read(path, as_version=4)
    blocks = mermaid_blocks(nb, main_path_only=True)
    if not blocks:
        return ["no ```mermaid block in a markdown cell of the main path (before the first Appendix heading)"]
    problems = []
    for block in mermaid_blocks(nb):
        first = next((line.split()[0] for line in block.splitlines() if line.strip()), "")
        if first not in DIAGRAM_TYPES:
            problems.append(
                f"a diagram starts with {first!r}, not a diagram type ({', '.join(DIAGRAM_TYPES)})"
            )
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_main_path_draws_the_mechanism(path):
    problems = diagram_findings(path)
    if path.name in NOT_YET_DRAWN:
        assert problems, f"{path.name} draws its mechanism now: remove it from NOT_YET_DRAWN"
        pytest.xfail(f"no diagram yet: {problems}")
    assert not problems, f"{path.name}: {problems}"


def _probe(tmp_path: Path, *markdown: str) -> list[str]:
    path = tmp_path / "99_probe.ipynb"
    cells = [nbformat.v4.new_markdown_cell(m) for m in markdown]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return diagram_findings(path)


def test_the_check_wants_a_valid_diagram_on_the_main_path(tmp_path):
    diagram = '```mermaid\nsequenceDiagram\n  Parent->>Child: "fork()"\n```'
    assert _probe(tmp_path, "# 99 · Probe", f"## 1. How\n\n{diagram}\n\nText after.") == []
    assert _probe(tmp_path, "# 99 · Probe", f"## Appendix: later\n\n{diagram}") == [
        "no ```mermaid block in a markdown cell of the main path (before the first Appendix heading)"
    ]
    assert _probe(tmp_path, "```python\nx = 1\n```") != []  # another language is not a diagram
    wrong = _probe(tmp_path, diagram, "```mermaid\nflowchrt LR\n  A --> B\n```")
    assert wrong and "'flowchrt'" in wrong[0]
