"""Kernels of the set-up exit normally when asked to shut down (``helpers.kernel_shutdown``), so they
leave nothing in the temporary directory; without the extension, one that started a forkserver child
is SIGTERMed and leaves multiprocessing's ``pymp-*`` folder (ipykernel 7.4, jupyter_client 8.10)."""

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


@pytest.mark.skipif("forkserver" not in mp.get_all_start_methods(), reason="needs the forkserver (POSIX)")
@pytest.mark.parametrize("extension", [True, False], ids=["with the extension", "without"])
def test_a_kernel_that_started_a_forkserver_child_exits_normally_at_shutdown(extension):
    # "--IPKernelApp.extensions=[]" overrides the venv's configuration: ipykernel's behaviour alone.
    arguments = [] if extension else ["--IPKernelApp.extensions=[]"]
    # The kernel's own temporary directory, with a short path: the forkserver's socket lives there.
    with tempfile.TemporaryDirectory(prefix="kernel-") as folder:
        tmp = Path(folder)
        km, kc = start_new_kernel(env={**os.environ, "TMPDIR": folder}, extra_arguments=arguments)
        try:
            reply = kc.execute_interactive(CELL, timeout=120)
            assert reply["content"]["status"] == "ok", reply["content"]
            assert list(tmp.glob("pymp-*")), "the forkserver made no pymp-* folder"
        finally:
            kc.stop_channels()
            kernel = km.provisioner.process
            km.shutdown_kernel(
                now=False
            )  # as nbmake and JupyterLab do: request, 2.5 s, SIGTERM, 2.5 s, SIGKILL
        left = [p.name for p in tmp.iterdir()]
    if extension:
        assert (kernel.returncode, left) == (0, [])
    else:  # if this fails, ipykernel wakes its main loop itself: remove helpers/kernel_shutdown.py
        assert kernel.returncode == -signal.SIGTERM and any(name.startswith("pymp-") for name in left)
