"""The notebooks' setup cell: the first code cell of every notebook, one text, written here.

Where ``helpers`` is importable (a clone after ``make``, an installed wheel) the cell only imports
``helpers.resources.pattern_path``, the accessor the notebooks use for their pattern scripts. Where it
is missing, it installs the package with ``%pip`` from the repository on Colab and Kaggle only
(detected as their own libraries do: ``COLAB_RELEASE_TAG``, set on both since Kaggle's image is built on
Colab's; ``KAGGLE_KERNEL_RUN_TYPE``), and elsewhere stops with one line that says how to install it.

The repository's URL is one constant: pyproject.toml's ``[project.urls] Repository``; the cell
cannot import it (``helpers`` may be missing), so this module writes it into every notebook:

    .venv/bin/python -m tools.setup_cell          # lists the notebooks whose setup cell differs
    .venv/bin/python -m tools.setup_cell --write  # writes (or inserts) the setup cell in each

The ``setup-cell`` rule (tests/notebook_rules.py) checks every notebook against :func:`setup_cell`;
``tests/test_wheel.py`` runs the install path against a local repository standing in for the remote.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
MARK = "# Setup: "
TEMPLATE = """\
# Setup: the series' `helpers` package (docs/install.md). On Colab and Kaggle this cell installs it.
import importlib.util
import os

REPOSITORY = "{repository}"
if importlib.util.find_spec("helpers") is None:
    if "COLAB_RELEASE_TAG" in os.environ or "KAGGLE_KERNEL_RUN_TYPE" in os.environ:
        %pip install --quiet git+{{REPOSITORY}}
        importlib.invalidate_caches()
    else:
        raise ModuleNotFoundError(f"No module named 'helpers': pip install git+{{REPOSITORY}}, then restart")
elif importlib.util.find_spec("helpers").submodule_search_locations is None:  # a helpers.py, not the package
    raise ImportError(f"{{importlib.util.find_spec('helpers').origin}} shadows the series' helpers: rename it")
from helpers.resources import pattern_path"""


def repository() -> str:
    """The repository's URL: pyproject.toml's ``[project.urls] Repository``."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


def setup_cell(url: str | None = None) -> str:
    """The setup cell's source, installing from ``url`` (default: :func:`repository`)."""
    return TEMPLATE.format(repository=url or repository())


def first_code_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    return next((cell for cell in nb.cells if cell.cell_type == "code"), None)


def differing() -> list[Path]:
    """The notebooks whose first code cell is not :func:`setup_cell`."""
    expected = setup_cell()
    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    return [p for p in paths if getattr(first_code_cell(nbformat.read(p, 4)), "source", "") != expected]


def write(path: Path) -> None:
    """Give ``path`` the setup cell: replace its first code cell if it is one, else insert one before it."""
    nb = nbformat.read(path, 4)
    first = first_code_cell(nb)
    if first is not None and first.source.startswith(MARK):
        first.source = setup_cell()
    else:
        at = nb.cells.index(first) if first is not None else len(nb.cells)
        nb.cells.insert(at, nbformat.v4.new_code_cell(setup_cell()))
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.setup_cell", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the setup cell into every notebook")
    args = parser.parse_args(argv)
    stale = differing()
    for path in stale:
        if args.write:
            write(path)
        print(f"{'wrote' if args.write else 'differs:'} {path.relative_to(ROOT)}")
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
