"""The portability switch: ``MP_DEFAULT_START_METHOD`` forces the default start method in the test
process (conftest.py), and the kernelspecs in ``jupyter-config/kernels`` force it in notebook kernels
(``make test-spawn`` runs the notebooks with ``--nbmake-kernel=python3-spawn``), with no notebook change.
Every test kernel, ``python3`` included, exits through ``sys.exit`` on SIGTERM (see below)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
FORCEABLE = [m for m in ("spawn", "forkserver") if m in mp.get_all_start_methods()]


@pytest.mark.default_start_method  # `make test-spawn` runs it
def test_this_session_runs_with_the_forced_default():
    method = os.environ.get("MP_DEFAULT_START_METHOD", "").strip()
    if not method:
        pytest.skip(f"MP_DEFAULT_START_METHOD is not set: the platform default ({mp.get_start_method()})")
    assert mp.get_start_method() == method


def test_there_is_a_kernelspec_for_each_forced_default_and_the_default():
    kernels = sorted(p.name for p in (ROOT / "jupyter-config" / "kernels").iterdir())
    assert kernels == ["python3", "python3-forkserver", "python3-spawn"]


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="needs POSIX signals")
@pytest.mark.parametrize("kernel_name", ["python3", *(f"python3-{m}" for m in FORCEABLE)])
def test_a_kernel_terminated_at_shutdown_still_removes_its_temporary_files(
    kernel_name, tmp_path, monkeypatch
):
    # jupyter_client sends SIGTERM to a kernel still running half-way through its shutdown wait
    # (2.5 s by default): on a busy machine, most of them. Killed by it, a kernel leaves the folder
    # multiprocessing made for it (pymp-*); the test kernels exit through sys.exit instead.
    monkeypatch.setenv("JUPYTER_PATH", str(ROOT / "jupyter-config"))  # as the Makefile sets it
    km, kc = start_new_kernel(kernel_name=kernel_name, env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        code = "import torch\nfrom multiprocessing.reduction import ForkingPickler\n"
        code += "ForkingPickler.dumps(torch.ones(1))"  # a tensor pickled for another process
        assert kc.execute_interactive(code, timeout=120)["content"]["status"] == "ok"
        assert list(tmp_path.glob("pymp-*")), "pickling a tensor for another process made no pymp-* folder"
    finally:
        kc.stop_channels()
        process = km.provisioner.process
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        km.cleanup_resources()
    assert code == 128 + signal.SIGTERM and not list(tmp_path.glob("pymp-*"))


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
