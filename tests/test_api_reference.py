"""The helpers API contract: __version__, __all__ in every module, type hints and docstring examples on
every public function; and the generated docs in sync with what they are generated from (docs/API.md,
docs/errors.md, README.md's notebook table, the tested versions; regenerate with `make docs`)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from pathlib import Path

import nbformat
import pytest

import helpers

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

MODULES = gen.module_names()


def _public_functions(module):
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__ == module.__name__:
            for attr, member in vars(obj).items():
                if inspect.isfunction(member) and not attr.startswith("_"):
                    yield f"{name}.{attr}", member


def test_version_is_a_string():
    assert isinstance(helpers.__version__, str) and helpers.__version__.count(".") >= 1


GENERATED = gen.generated()


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_generated_docs_are_up_to_date(path):
    assert path.read_text() == GENERATED[path], (
        f"{path.relative_to(ROOT)} is out of date: run `make docs` (python -m tools.gen_docs) and commit it"
    )


def test_a_stale_notebook_header_or_a_lost_block_is_caught(tmp_path, monkeypatch):
    notebook = tmp_path / "00_x.ipynb"
    header = "# 00 · X\n\nTeaches x.\n\n- **Reading time:** about 1 min\n- **Run time:** about 2 s on a CPU."
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(header)]), notebook)
    monkeypatch.setattr(gen, "NOTEBOOKS", tmp_path)
    block = "<!-- begin: notebooks -->\nold row\n<!-- end: notebooks -->"
    assert "| [00 · X](notebooks/00_x.ipynb) | Teaches x. | about 1 min | about 2 s |" in gen.fill_blocks(
        block, ("notebooks",)
    )
    with pytest.raises(ValueError, match="expected"):
        gen.fill_blocks("no block here", ("notebooks",))


def test_the_tested_versions_come_from_helpers_environment(monkeypatch):
    from helpers import environment

    monkeypatch.setattr(environment, "TESTED_PYTHONS", ((3, 10), (3, 15)))
    assert "Python 3.10 to 3.15" in gen.tested_versions()
    assert f"torch {environment.TESTED_TORCH}" in gen.tested_versions()


@pytest.mark.parametrize("name", MODULES)
def test_module_declares_all_and_every_name_exists(name):
    module = importlib.import_module(name)
    assert isinstance(getattr(module, "__all__", None), list | tuple), f"{name} has no __all__"
    missing = [item for item in module.__all__ if not hasattr(module, item)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
    assert module.__doc__, f"{name} has no module docstring"


@pytest.mark.parametrize("name", MODULES)
def test_public_functions_have_type_hints_and_a_docstring_example(name):
    module = importlib.import_module(name)
    problems = []
    for qualname, fn in _public_functions(module):
        signature = inspect.signature(fn)
        unhinted = [
            p.name
            for p in signature.parameters.values()
            if p.annotation is inspect.Parameter.empty
            and p.name not in ("self", "cls")
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)  # *args/**kwargs pass through
        ]
        if unhinted or signature.return_annotation is inspect.Signature.empty:
            problems.append(f"{qualname}: type hints missing ({unhinted or 'return'})")
        if ">>>" not in (inspect.getdoc(fn) or ""):
            problems.append(f"{qualname}: no docstring example (>>>)")
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)
