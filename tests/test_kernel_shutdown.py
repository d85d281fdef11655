"""Kernels of the set-up exit normally when asked to shut down (``helpers.kernel_shutdown``), so they
leave nothing in the temporary directory; without the extension, one that started a forkserver child
is SIGTERMed and leaves multiprocessing's ``pymp-*`` folder (ipykernel 7.4, jupyter_client 8.10).
A kernel whose exit outlasts jupyter_client's SIGTERM (as a loaded machine makes it) exits normally too."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "ipython_kernel_config.json"
# A forkserver child starts the resource tracker (which ignores SIGTERM) and makes the pymp-* folder.
CELL = """
import multiprocessing as mp
child = mp.get_context("forkserver").Process(target=print)
child.start()
child.join(timeout=60)
assert child.exitcode == 0
"""


def test_the_setup_installs_the_kernel_configuration_into_the_venv():
    installed = Path(sys.prefix, "etc", "ipython", CONFIG)
    assert installed.is_file(), f"{installed} is missing: run `make setup`"
    assert json.loads(installed.read_text()) == json.loads(
        (ROOT / "jupyter-config" / "ipython" / CONFIG).read_text()
    )


def _run_and_shut_down(cell: str, arguments: list[str], wait: float = 5.0) -> tuple[int, list[str]]:
    """Run ``cell`` in a new kernel, then shut it down as nbmake and JupyterLab do (request; SIGTERM
    at ``wait / 2``; SIGKILL at ``wait``): the kernel's exit code and what it left in its TMPDIR."""
    # The kernel's own temporary directory, with a short path: the forkserver's socket lives there.
    with tempfile.TemporaryDirectory(prefix="kernel-") as folder:
        km, kc = start_new_kernel(env={**os.environ, "TMPDIR": folder}, extra_arguments=arguments)
        km.shutdown_wait_time = wait
        try:
            reply = kc.execute_interactive(cell, timeout=120)
            assert reply["content"]["status"] == "ok", reply["content"]
            assert list(Path(folder).glob("pymp-*")), "the forkserver made no pymp-* folder"
        finally:
            kc.stop_channels()
            kernel = km.provisioner.process
            km.shutdown_kernel(now=False)
        return kernel.returncode, [p.name for p in Path(folder).iterdir()]


@pytest.mark.skipif("forkserver" not in mp.get_all_start_methods(), reason="needs the forkserver (POSIX)")
@pytest.mark.parametrize("extension", [True, False], ids=["with the extension", "without"])
def test_a_kernel_that_started_a_forkserver_child_exits_normally_at_shutdown(extension):
    # "--IPKernelApp.extensions=[]" overrides the venv's configuration: ipykernel's behaviour alone.
    if extension:  # SIGKILL late (16 s): a loaded machine may take more than 5 s to exit normally
        assert _run_and_shut_down(CELL, [], wait=16.0) == (0, [])
    else:  # ipykernel alone waits for its children until jupyter_client's SIGTERM, whenever it comes
        code, left = _run_and_shut_down(CELL, ["--IPKernelApp.extensions=[]"])
        # if this fails, ipykernel wakes its main loop itself: remove helpers/kernel_shutdown.py
        assert code == -signal.SIGTERM and any(name.startswith("pymp-") for name in left)


@pytest.mark.skipif("forkserver" not in mp.get_all_start_methods(), reason="needs the forkserver (POSIX)")
def test_a_kernel_whose_exit_outlasts_the_sigterm_still_exits_normally():
    # An exit handler of 9 s stands in for a slow exit; SIGTERM comes at 8 s, SIGKILL at 16 s.
    slow_exit = CELL + "import atexit, time\natexit.register(time.sleep, 9)\n"
    assert _run_and_shut_down(slow_exit, [], wait=16.0) == (0, [])
