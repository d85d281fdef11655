"""Start the project's JupyterLab in a sandbox, and name the Chromium to drive against it.

Everything lives in a temporary directory: the notebooks (copies: saving never touches the
repository), Jupyter's runtime, config, data, settings and workspace directories, and IPython's.
The server listens on 127.0.0.1, on a free port, with a random token.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from helpers.ddp import free_port

ROOT = Path(__file__).resolve().parents[2]


def chromium() -> str | None:
    """The Chromium to drive: ``$E2E_CHROMIUM``, else Debian's ``/usr/bin/chromium`` (``.ci/run``
    installs it), else None: Playwright's own (``python -m playwright install chromium``; without it
    Playwright's launch fails and says so)."""
    if os.environ.get("E2E_CHROMIUM"):
        return os.environ["E2E_CHROMIUM"]
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


# Chromium as root needs --no-sandbox; the rest keeps it off the network (this machine's closed
# network refuses its background connections) and quiet.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
]
# JupyterLab's own calls out: news feed, update check, the extension manager's PyPI search.
LAB_ARGS = [
    "--no-browser",
    "--ServerApp.ip=127.0.0.1",
    "--ServerApp.port_retries=0",
    "--ServerApp.terminals_enabled=False",
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
    "--LabApp.expose_app_in_browser=True",
]
PAGE_CONFIG = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
# Attach every cell to the DOM, so the checks and screenshots see the whole notebook.
NOTEBOOK_SETTINGS = {"windowingMode": "none"}


@dataclass
class LabServer:
    process: subprocess.Popen
    port: int
    token: str
    root_dir: Path
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}?token={self.token}"

    def add_folder(self, name: str, notebooks: list[Path]) -> str:
        """Copy ``notebooks`` into ``name/notebooks`` of the server's root, with the recorded
        transcripts beside them and the pattern scripts in ``name/patterns`` (the notebooks read
        ``transcripts/...`` and ``../patterns/...``, as in a clone); return the notebooks' folder there.

        Each test gets the whole folder as a learner has it, and nothing another test wrote in its own.
        """
        folder = self.root_dir / name / "notebooks"
        folder.mkdir(parents=True)
        for path in notebooks:
            shutil.copy2(path, folder / path.name)
        source = notebooks[0].parent
        if (source / "transcripts").is_dir():
            shutil.copytree(source / "transcripts", folder / "transcripts")
        if (source.parent / "patterns").is_dir():
            shutil.copytree(source.parent / "patterns", folder.parent / "patterns")
        return f"{name}/notebooks"

    def descendants(self) -> list[psutil.Process]:
        """The server's live descendants: its kernels and what they started."""
        return _alive(psutil.Process(self.process.pid).children(recursive=True))

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(
            f"{self.base_url}/api/{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def shutdown_kernels(self, grace: float = 20.0) -> list[str]:
        """Shut every session's kernel down; return the server's descendants still alive after."""
        for session in self.api("sessions"):
            with contextlib.suppress(OSError):
                self.api(f"sessions/{session['id']}", method="DELETE")
        deadline = time.monotonic() + grace
        while True:
            left = self.descendants()
            if not left or time.monotonic() > deadline:
                return [f"pid {p.pid}: {' '.join(p.cmdline())[:200]}" for p in left]
            time.sleep(0.2)


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
    return alive


@contextlib.contextmanager
def lab_server(workdir: Path, start_timeout: float = 90.0) -> Iterator[LabServer]:
    """JupyterLab serving ``workdir``/notebooks (fill it with :meth:`LabServer.add_folder`); stopped
    and reaped on exit."""
    root_dir = workdir / "notebooks"
    root_dir.mkdir()
    dirs = {
        name: workdir / name for name in ("runtime", "config", "data", "settings", "workspaces", "ipython")
    }
    for path in dirs.values():
        path.mkdir()
    (dirs["config"] / "labconfig").mkdir()
    (dirs["config"] / "labconfig" / "page_config.json").write_text(json.dumps(PAGE_CONFIG))
    tracker = dirs["settings"] / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps(NOTEBOOK_SETTINGS))
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),  # the kernel and its children import this checkout's helpers
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
        IPYTHONDIR=str(dirs["ipython"]),
    )
    env.pop("MPLBACKEND", None)
    port, token = free_port(), secrets.token_hex(24)
    log = workdir / "jupyterlab.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        *LAB_ARGS,
        f"--ServerApp.port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        f"--LabApp.workspaces_dir={dirs['workspaces']}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # CI runs as root
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = LabServer(process, port, token, root_dir, log)
    try:
        _wait_until_up(server, start_timeout)
        yield server
    finally:
        _stop(server)


def _wait_until_up(server: LabServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {server.process.returncode}:\n{server.log_tail()}")
        with contextlib.suppress(OSError):
            server.api("status")
            return
        time.sleep(0.5)
    raise TimeoutError(f"JupyterLab did not answer within {timeout:.0f} s:\n{server.log_tail()}")


def _stop(server: LabServer) -> None:
    """Ask the server to shut down (kernels included); terminate, then kill its group if it won't."""
    with contextlib.suppress(OSError):
        server.api("shutdown", method="POST")
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.process.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.process.wait(timeout=wait)
                break
    # Anything the server started in its own process group (kernels, their children) goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.process.pid, signal.SIGKILL)
