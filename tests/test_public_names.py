"""Every public name of ``helpers`` is used outside its own module and the tests.

A name in a module's ``__all__`` must be used (as code, not in a docstring) by a notebook, a script,
the coursework, an exercise or its solution, a Python example in the README or docs/, or another ``helpers``
module (or setup.py, the build step). A public name nobody uses is either dead code or a lesson that lost its notebook: remove it
(and note it in CHANGELOG.md), or use it where it teaches something.

One narrow rule covers command lines: a module that README.md, docs/ or a notebook runs as
``python -m helpers.X`` is a user of its ``main`` and of the names ``main`` uses, including the names
inside a module-level constant that ``main`` uses (``helpers.cuda.GPU_DEMOS``: the demos its command
line runs by name). Only ``main``'s own body counts, not what the functions it calls use, so an
internal helper stays private.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from tools.notebook_model import cell_tree, notebooks

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def names_in_code(source: str) -> set[str]:
    """The identifiers a piece of Python code uses: names, attributes and imported names.

    >>> sorted(names_in_code("from helpers.dataloading import draws as d\\nd(hd.collect(x))"))
    ['collect', 'd', 'draws', 'hd', 'x']
    """
    found: set[str] = set()
    for node in ast.walk(cell_tree(source)):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.update(part for part in node.name.split("."))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
            # code kept in a string and run elsewhere (a cell for a second kernel, a torchrun script)
            try:
                found |= names_in_code(node.value)
            except SyntaxError:
                pass
    return found


# The hand-written pages a learner or instructor reads (docs/API.md is generated from the code itself).
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "API.md")]


def page_examples() -> list[tuple[str, str]]:
    """The ```python blocks of README.md and docs/, as (page, code)."""
    return [
        (str(page.relative_to(ROOT)), code)
        for page in PAGES
        for code in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    ]


def users() -> dict[str, set[str]]:
    """What uses which names: ``{source label: names it uses}`` for every place that counts."""
    sources: dict[str, set[str]] = {}
    for nb in notebooks():
        sources[f"notebooks/{nb.name}"] = set().union(*(names_in_code(c.source) for c in nb.code_cells))
    for folder in ("scripts", "tools", "coursework", "exercises", "solutions", "helpers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            sources[str(path.relative_to(ROOT))] = names_in_code(path.read_text())
    sources["setup.py"] = names_in_code((ROOT / "setup.py").read_text())  # the wheel's build step
    for index, (page, example) in enumerate(page_examples()):
        sources[f"{page} example {index}"] = names_in_code(example)
    commands = shown_commands()
    for module_name in gen.module_names():
        if module_name in commands:
            sources[f"python -m {module_name}"] = names_main_uses(module_name)
    return sources


def shown_commands() -> set[str]:
    """The ``helpers`` modules that README.md, docs/ or a notebook runs as ``python -m helpers.X``."""
    texts = [page.read_text() for page in PAGES]
    texts += [nb.path.read_text() for nb in notebooks()]
    return set(re.findall(r"-m (helpers(?:\.\w+)+)", "\n".join(texts)))


def _command_tree(module_name: str) -> ast.Module:
    """The source of what ``python -m module_name`` runs: a package's ``__main__``, and where it imports
    ``main`` from (``helpers.doctor.__main__`` runs ``helpers.doctor.cli.main``)."""
    spec = importlib.util.find_spec(module_name)
    if spec.submodule_search_locations:  # a package
        spec = importlib.util.find_spec(f"{module_name}.__main__")
    tree = ast.parse(Path(spec.origin).read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(alias.name == "main" for alias in node.names):
            return _command_tree(node.module)
    return tree


def names_main_uses(module_name: str) -> set[str]:
    """``main`` and the names its body uses; a module-level constant it uses adds the names inside it.

    >>> {"main", "GPU_DEMOS", "run_gpu_demos"} <= names_main_uses("helpers.cuda")
    True
    """
    tree = _command_tree(module_name)
    main = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"), None)
    if main is None:
        return set()
    if ast.get_docstring(main) is not None:
        main.body = main.body[1:]  # the docstring explains; only code counts
    used = {"main"} | names_in_code(ast.unparse(main))
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in used for t in targets) and node.value is not None:
                used |= names_in_code(ast.unparse(node.value))
    return used


def _annotation_names(module) -> set[str]:
    """Names in the signatures of the module's public callables: a class a public function returns or
    takes is part of the API even if no caller spells its name."""
    found: set[str] = set()
    for name in module.__all__:
        obj = getattr(module, name)
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):
            continue
        annotations = [p.annotation for p in signature.parameters.values()] + [signature.return_annotation]
        found.update(re.findall(r"[A-Za-z_]\w*", " ".join(str(a) for a in annotations)))
    return found


def unused_public_names(module_name: str, sources: dict[str, set[str]]) -> list[str]:
    """The public names of ``module_name`` that nothing outside the module uses."""
    module = importlib.import_module(module_name)
    own = str(Path(module.__file__).relative_to(ROOT))
    used = set().union(*(names for label, names in sources.items() if label != own))
    used |= _annotation_names(module)
    return [name for name in module.__all__ if name not in used]


SOURCES = users()


@pytest.mark.parametrize("module_name", gen.module_names())
def test_every_public_helpers_name_is_used_outside_its_module(module_name):
    unused = unused_public_names(module_name, SOURCES)
    assert not unused, (
        f"{module_name}: public names used by no notebook, script, coursework, exercise, README/docs "
        f"example or other module: {unused}. Remove them (and say so in CHANGELOG.md), or use them where "
        "they teach."
    )


def test_the_command_line_rule_is_narrow():
    assert {"helpers.cuda", "helpers.doctor", "helpers.hogwild"} <= shown_commands()
    # what main's callees use does not count: the doctor's CPU check calls usable_cpus, main does not
    doctor_cli = names_main_uses("helpers.doctor")
    assert "check" in doctor_cli and "usable_cpus" not in doctor_cli
    assert names_main_uses("helpers.launch") == set()  # no main, no command line


def test_the_usage_scan_sees_code_strings_and_ignores_docstrings():
    assert "wait_until_signalled" in names_in_code('CELL = """\nwait_until_signalled(0, "a", ".")\n"""')
    assert "explained" not in names_in_code('def f():\n    """explained here"""\n')
