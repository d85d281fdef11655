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


def test_environment_yml_lists_exactly_the_pyproject_dependencies():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    (pip_section,) = [d for d in env["dependencies"] if isinstance(d, dict)]
    listed = [d for d in pip_section["pip"] if d != "-e ."]
    assert set(listed) == _pyproject_dependencies()
    assert "-e ." in pip_section["pip"]
    python = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert python == [f"python{requires}"]


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
        assert path.name in readme, f"README's notebook table misses {path.name}"


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
