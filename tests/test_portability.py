"""The portability switch: ``MP_DEFAULT_START_METHOD`` forces the default start method in the test
process (conftest.py), and the kernelspecs in ``jupyter-config/kernels`` force it in notebook kernels
(``make test-spawn`` runs the notebooks with ``--nbmake-kernel=python3-spawn``), with no notebook change."""

from __future__ import annotations

import ast
import multiprocessing as mp
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
FORCEABLE = [m for m in ("spawn", "forkserver") if m in mp.get_all_start_methods()]


@pytest.mark.default_start_method  # `make test-spawn` runs it
def test_this_session_runs_with_the_forced_default():
    method = os.environ.get("MP_DEFAULT_START_METHOD", "").strip()
    if not method:
        pytest.skip(f"MP_DEFAULT_START_METHOD is not set: the platform default ({mp.get_start_method()})")
    assert mp.get_start_method() == method


def test_there_is_a_kernelspec_for_each_forced_default():
    kernels = sorted(p.name for p in (ROOT / "jupyter-config" / "kernels").iterdir())
    assert kernels == ["python3-forkserver", "python3-spawn"]


@pytest.mark.parametrize("method", FORCEABLE)
def test_a_kernel_of_that_kernelspec_starts_with_the_forced_default(method, tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_PATH", str(ROOT / "jupyter-config"))  # as `make test-spawn` sets it
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import multiprocessing\nprint(multiprocessing.get_start_method())")]
    )
    NotebookClient(
        nb, timeout=120, kernel_name=f"python3-{method}", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    assert nb.cells[0].outputs[0]["text"].strip() == method


@pytest.mark.parametrize("method", mp.get_all_start_methods())
def test_a_spawn_parameter_where_spawn_is_not_the_fast_method_is_left_to_the_spawn_stage(method, request):
    """conftest.py marks it `spawn_variant`: `make test` deselects it, `make test-spawn` runs it (and
    this test's own spawn case there)."""
    from helpers.launch import FAST_METHOD

    marked = request.node.get_closest_marker("spawn_variant") is not None
    assert marked == (method == "spawn" and FAST_METHOD != "spawn")


def test_the_forced_stages_import_every_test_file_that_can_hold_their_tests(tmp_path):
    """`--forced-files-only` (the forced stages) skips a test file that conftest.FORCED_FILE does not
    match; a file holding a `default_start_method` test or a `method` parameter must match."""
    from conftest import holds_forced_tests

    cases = {
        "@pytest.mark.default_start_method\ndef test_a(): ...": True,
        "pytestmark = pytest.mark.default_start_method\n": True,
        '@pytest.mark.parametrize("method", METHODS)\ndef test_b(method): ...': True,
        "@pytest.mark.parametrize('fn, method', CASES)\ndef test_c(fn, method): ...": True,
        "@pytest.fixture(params=METHODS)\ndef method(request): ...": True,
        '@pytest.mark.parametrize("methods", [METHODS])\ndef test_d(methods): ...': False,
        "def test_e(): assert get_start_method() == 'fork'": False,
    }
    for i, (text, holds) in enumerate(cases.items()):
        path = tmp_path / f"test_{i}.py"
        path.write_text(text)
        assert holds_forced_tests(path) == holds, text


def _spawn_in_notebook_marks() -> dict[str, tuple[str, ...]]:
    """``{test file::test name: the marker's arguments}`` for each test marked ``spawn_in_notebook``,
    read from the test files' source, whatever this session selected; a marked test without a
    ``method`` parameter is listed with no arguments."""
    marks = {}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            calls = [d for d in node.decorator_list if isinstance(d, ast.Call)]
            for call in calls:
                if ast.unparse(call.func) == "pytest.mark.spawn_in_notebook":
                    args = tuple(ast.literal_eval(a) for a in call.args)
                    has_method = any(
                        ast.unparse(c.func) == "pytest.mark.parametrize" and "method" in str(c.args[0].value)
                        for c in calls if c.args and isinstance(c.args[0], ast.Constant)
                    )  # fmt: skip
                    marks[f"{path.name}::{node.name}"] = args if has_method else ()
    return marks


def test_a_spawn_variant_left_to_a_notebook_names_workers_that_notebook_runs_on_the_macos_path():
    """`make test-spawn` leaves out the spawn variant of a test marked ``spawn_in_notebook(NN,
    *names)``: notebook NN runs those workers under spawn in `make test-wheel` (the macOS path). The
    test must have a `method` parameter, and each name must appear in a code cell of that notebook
    that the macOS path runs (not one behind ``linux_only``), other than in a listing it shows."""
    from tools.notebook_model import notebooks

    series = {nb.number: nb for nb in notebooks()}
    marks = _spawn_in_notebook_marks()
    assert len(marks) >= 10  # tests/test_data.py, test_queues.py, ...
    for test, args in marks.items():
        number, *names = args or ("",)
        assert number in series and names, f"{test}: no `method` parameter, or no notebook and names"
        used = set()
        for cell in series[number].code_cells:
            if "linux_only(" not in cell.source:
                shown = {
                    id(n) for call in ast.walk(cell.tree) if _calls(call, "show_source", "show_script")
                    for n in ast.walk(call)
                }  # fmt: skip
                used |= {_name(n) for n in ast.walk(cell.tree) if id(n) not in shown}
        assert set(names) <= used, (test, number, set(names) - used)


def _name(node: ast.AST) -> str | None:
    return getattr(node, "attr", getattr(node, "id", None))


def _calls(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Call) and _name(node.func) in names
