"""Project-level contracts: environment.yml in sync, notebooks committed clean and well formed."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import yaml

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _pyproject_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["dependencies"]) | set(project["optional-dependencies"]["dev"])


def test_environment_yml_lists_exactly_the_pyproject_dependencies_but_torch():
    # torch, and the helpers package that depends on it, come from tools/install_torch.py (the
    # build this machine needs); everything else within the lock, as on the Makefile route.
    text = (ROOT / "environment.yml").read_text()
    env = yaml.safe_load(text)
    (pip_section,) = [d for d in env["dependencies"] if isinstance(d, dict)]
    listed = [d for d in pip_section["pip"] if not d.startswith("-")]
    torch = {d for d in _pyproject_dependencies() if re.match(r"torch\b", d)}
    assert len(torch) == 1 and set(listed) == _pyproject_dependencies() - torch
    assert [d for d in pip_section["pip"] if d.startswith("-")] == ["-c requirements/constraints.txt"]
    assert (ROOT / "requirements" / "constraints.txt").is_file()
    assert "python tools/install_torch.py" in text
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert python == [f"python{requires}"]


def test_the_oldest_tested_python_is_the_one_the_project_declares():
    # helpers.environment.TESTED_PYTHONS is the one place; what cannot read it is checked against it.
    from helpers.environment import TESTED_PYTHONS

    oldest = ".".join(map(str, TESTED_PYTHONS[0]))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["requires-python"] == f">={oldest}"  # environment.yml: test above
    assert pyproject["tool"]["ruff"]["target-version"] == "py" + oldest.replace(".", "")
    (locked_for,) = re.findall(r"--python-version (\d[\d.]*)", (ROOT / "Makefile").read_text())
    assert locked_for == oldest, "make lock must cover the oldest tested Python"


def test_every_environment_yml_dependency_says_what_uses_it():
    dependencies = (ROOT / "environment.yml").read_text().split("\ndependencies:\n", 1)[1]
    entries = [
        line
        for line in dependencies.splitlines()
        if re.match(r"\s+- ", line) and line.strip() not in ("- pip", "- pip:")
    ]
    assert entries and all("  # " in line for line in entries), [e for e in entries if "  # " not in e]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: cells {dirty} have outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_the_contract(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), "opens with a title"
    for field in ("Prerequisites", "Needs", "Run time"):
        assert f"**{field}" in first.source, f"the opening cell names its {field}"
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    headings = [line.strip() for line in markdown.splitlines() if line.startswith("#")]
    assert "## Summary" in headings and "## Exercises" in headings
    assert headings.index("## Summary") < headings.index("## Exercises")
    assert "set_start_method(" not in "".join(c.source for c in nb.cells if c.cell_type == "code"), (
        "notebooks use get_context; set_start_method fails when a cell is re-run"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_cells_are_short(path):
    nb = nbformat.read(path, as_version=4)
    lengths = sorted(len(c.source.splitlines()) for c in nb.cells if c.cell_type == "code")
    assert lengths[len(lengths) // 2] <= 8, "median code cell must stay well under 10 lines"
    assert lengths[-1] <= 25, "split long cells"


def test_readme_lists_every_notebook():
    readme = (ROOT / "README.md").read_text()
    for path in NOTEBOOKS:
        assert f"](notebooks/{path.name})" in readme, f"README's notebook table misses {path.name}"


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 120, f"README.md has {len(lines)} lines: move detail to a page under docs/"


def test_no_merge_conflict_markers_in_tracked_files():
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    marked = []
    for name in files:
        try:
            text = (ROOT / name).read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        if re.search(r"^(<{7}|>{7}) ", text, flags=re.M):
            marked.append(name)
    assert not marked, f"merge conflict markers in {marked}"


def hidden_headings(nb) -> list[str]:
    """Markdown headings commented out inside code cells (`# ## 6. ...`): invisible as headings.

    >>> nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1\\n# ## 6. Timeouts")])
    >>> hidden_headings(nb)
    ['code cell 0: # ## 6. Timeouts']
    """
    return [
        f"code cell {index}: {line.strip()}"
        for index, cell in enumerate(c for c in nb.cells if c.cell_type == "code")
        for line in cell.source.splitlines()
        if re.match(r"\s*#\s*#{1,6}\s", line)
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_heading_hides_in_a_code_cell(path):
    hidden = hidden_headings(nbformat.read(path, as_version=4))
    assert not hidden, f"{path.name}: a heading belongs in a markdown cell: {hidden}"


def section_numbers(markdown: str) -> list[str]:
    """The numbered headings of a notebook in order: ``["1", "2", "2a", "2b", "3"]``.

    >>> section_numbers("## Setup\\n## 1. A\\n### 1a. B\\n## 2. C\\n## Summary")
    ['1', '1a', '2']
    """
    return re.findall(r"^#{2,3} (\d+[a-z]?)\. ", markdown, flags=re.M)


def numbering_gaps(numbers: list[str]) -> list[str]:
    """Where ``numbers`` skips or repeats: sections run 1, 2, 3...; subsections 2a, 2b... under 2.

    >>> numbering_gaps(["1", "2", "2a", "2b", "3"]), numbering_gaps(["1", "3", "3b"])
    ([], ['3 after 1', '3b after 3'])
    """
    gaps, previous = [], "0"
    for number in numbers:
        section, letter = int(re.match(r"\d+", number)[0]), number[-1] if number[-1].isalpha() else ""
        last_section = int(re.match(r"\d+", previous)[0])
        last_letter = previous[-1] if previous[-1].isalpha() else ""
        expected = (
            section == last_section and letter == chr(ord(last_letter or "`") + 1)
            if letter
            else section == last_section + 1
        )
        if not expected:
            gaps.append(f"{number} after {previous}")
        previous = number
    return gaps


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_section_numbers_are_contiguous(path):
    nb = nbformat.read(path, as_version=4)
    numbers = section_numbers("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    assert not numbering_gaps(numbers), f"{path.name}: sections {numbers}: {numbering_gaps(numbers)}"


def test_the_overview_map_links_every_notebook_and_every_title_is_numbered():
    overview = nbformat.read(ROOT / "notebooks" / "00_overview.ipynb", as_version=4)
    markdown = "\n".join(c.source for c in overview.cells if c.cell_type == "markdown")
    linked = set(re.findall(r"\]\((\d\d_\w+\.ipynb)\)", markdown))
    assert linked == {path.name for path in NOTEBOOKS}, (
        f"map vs folder: {linked ^ {p.name for p in NOTEBOOKS}}"
    )
    for path in NOTEBOOKS:
        title = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
        assert title.startswith(f"# {path.name[:2]} · "), f"{path.name}: {title}"
