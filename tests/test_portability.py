"""The portability switch: MP_DEFAULT_START_METHOD forces the default start method in the test
process and in notebook kernels (through an IPython start-up file), without any notebook change."""

from __future__ import annotations

import multiprocessing as mp

import nbformat
import pytest
from nbclient import NotebookClient

from tests.portability import (
    ENV_VAR,
    apply_forced_start_method,
    forced_start_method,
    make_ipython_dir,
)

FORCEABLE = [m for m in ("spawn", "forkserver") if m in mp.get_all_start_methods()]


def test_this_session_runs_with_the_forced_default():
    method = forced_start_method()
    if method is None:
        pytest.skip(f"{ENV_VAR} is not set: the platform default ({mp.get_start_method()}) is in use")
    assert mp.get_start_method() == method


def test_unset_or_empty_means_the_platform_default():
    assert forced_start_method({}) is None
    assert forced_start_method({ENV_VAR: " "}) is None
    assert apply_forced_start_method({}) is None


def test_a_bad_value_gets_a_clear_error():
    with pytest.raises(ValueError, match="not a start method of this platform"):
        forced_start_method({ENV_VAR: "threads"})
    with pytest.raises(ValueError, match="unknown start method"):
        make_ipython_dir("/nonexistent", "threads")


def test_apply_sets_the_default_and_can_be_undone():
    before = mp.get_start_method()
    try:
        assert apply_forced_start_method({ENV_VAR: "spawn"}) == "spawn"
        assert mp.get_start_method() == "spawn"
    finally:
        mp.set_start_method(before, force=True)


@pytest.mark.parametrize("method", FORCEABLE)
def test_a_notebook_kernel_starts_with_the_forced_default(method, tmp_path, monkeypatch):
    monkeypatch.setenv("IPYTHONDIR", str(make_ipython_dir(tmp_path / "ipython", method)))
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import multiprocessing\nprint(multiprocessing.get_start_method())")]
    )
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    assert nb.cells[0].outputs[0]["text"].strip() == method
