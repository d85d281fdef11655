"""Project-level contracts: environment.yml in sync with pyproject.toml, no merge conflict markers.

The notebooks' rules are tests/notebook_rules.py (run by tests/test_notebook_contract.py)."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tools.notebook_model import notebooks

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


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


def test_the_classifiers_name_every_tested_python():
    from helpers.environment import TESTED_PYTHONS

    (major, oldest), (_, newest) = TESTED_PYTHONS
    classifiers = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["classifiers"]
    named = [
        c.rsplit(" :: ", 1)[1] for c in classifiers if c.startswith("Programming Language :: Python :: 3.")
    ]
    assert named == [f"{major}.{minor}" for minor in range(oldest, newest + 1)]


def test_every_environment_yml_dependency_says_what_uses_it():
    dependencies = (ROOT / "environment.yml").read_text().split("\ndependencies:\n", 1)[1]
    entries = [
        line
        for line in dependencies.splitlines()
        if re.match(r"\s+- ", line) and line.strip() not in ("- pip", "- pip:")
    ]
    assert entries and all("  # " in line for line in entries), [e for e in entries if "  # " not in e]


def test_readme_lists_every_notebook():
    readme = (ROOT / "README.md").read_text()
    for nb in notebooks():
        assert f"](notebooks/{nb.name})" in readme, f"README's notebook table misses {nb.name}"


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


def test_the_testing_page_lists_every_stage_of_the_ci_run_in_order():
    """docs/testing.md's table of stages names the `make` targets of .ci/run, in its order (``make site
    test-site > LOG &`` names two)."""
    run = [
        target
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.startswith("make ")
        for target in itertools.takewhile(lambda word: re.fullmatch(r"[\w-]+", word), line.split()[1:])
    ]
    page = (ROOT / "docs" / "testing.md").read_text()
    table = page[page.index("<!-- stages:") : page.index("<!-- end of stages -->")]
    listed = re.findall(r"^\| `make ([\w-]+)` \|", table, flags=re.MULTILINE)
    assert listed == run, f".ci/run runs {run}; docs/testing.md's stages list {listed}"


def test_the_setup_cell_names_a_helpers_py_that_shadows_the_series_package(tmp_path):
    """A learner's own helpers.py beside a notebook: the setup cell stops with the file's path and the
    fix, instead of `'helpers' is not a package` from the next import (issue 53). Where the series'
    package is found, the cell runs."""
    from tools.setup_cell import setup_cell

    run = (
        "import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
        "print(repr(InteractiveShell.instance().run_cell(sys.stdin.read()).error_in_exec))\n"
    )
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "helpers.py").write_text("x = 1\n")
    outcomes = {}
    for folder in (tmp_path / "mine", tmp_path):
        done = subprocess.run(
            [sys.executable, "-c", run],
            cwd=folder,
            input=setup_cell(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        outcomes[folder.name] = done.stdout.strip().splitlines()[-1]
    shadow = tmp_path / "mine" / "helpers.py"
    assert outcomes == {
        "mine": f'ImportError("{shadow} shadows the series\' helpers: rename it")',
        tmp_path.name: "None",
    }


def test_the_modules_collected_first_exist():
    """conftest.LONG_FIRST orders collection by name: a renamed module would silently fall back to
    alphabetical order (and a long tail on one worker)."""
    from conftest import LONG_FIRST

    assert [m for m in LONG_FIRST if not (ROOT / m).is_file()] == []
    assert len(set(LONG_FIRST)) == len(LONG_FIRST)
