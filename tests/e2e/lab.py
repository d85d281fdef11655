"""Start the project's JupyterLab in a sandbox, and find a Chromium or Chrome to drive against it.

Everything lives in a temporary directory: the notebooks (copies: saving never touches the
repository), Jupyter's runtime, config, data, settings and workspace directories, and IPython's.
The server listens on 127.0.0.1, on a free port, with a random token.

The browser is one already on the machine (:func:`find_browser`): nothing is ever downloaded.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
BROWSER_VAR = "E2E_CHROMIUM"
# Where Chromium and Chrome install themselves, by platform (absolute paths), then names on $PATH.
BROWSER_PATHS = {
    "linux": [
        "/usr/bin/chromium",  # Debian (`.ci/run` installs it), Arch
        "/usr/bin/chromium-browser",  # Fedora, openSUSE, older Ubuntu
        "/snap/bin/chromium",  # Ubuntu
        "/usr/lib/chromium/chromium",
        "/usr/bin/google-chrome-stable",
        "/usr/bin/google-chrome",
        "/opt/google/chrome/chrome",
    ],
    "darwin": [
        "/Applications/Chromium.app/Contents/MacOS/Chromium",
        "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
        "~/Applications/Chromium.app/Contents/MacOS/Chromium",
        "~/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    ],
}
BROWSER_NAMES = ["chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome"]
# One line per platform: how to get a browser there. Playwright's own download works everywhere.
INSTALL = {
    "debian": "`sudo apt-get install -y chromium`",
    "ubuntu": "`sudo snap install chromium`",
    "fedora": "`sudo dnf install -y chromium`",
    "arch": "`sudo pacman -S chromium`",
    "darwin": "`brew install --cask chromium`",
    "linux": "your distribution's `chromium` package",
}
NO_BROWSER = (
    "the browser test found no Chromium or Chrome ({where}): install one with {command}, or "
    "`python -m playwright install chromium`, or set E2E_CHROMIUM to a Chromium/Chrome binary; "
    "`-m 'not browser'` leaves the test out"
)


def _playwright_chromium() -> str | None:
    """The Chromium a `playwright install chromium` put in Playwright's cache, if there is one."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    with sync_playwright() as playwright:
        path = playwright.chromium.executable_path
    return path if os.access(path, os.X_OK) else None


def find_browser(
    environ: Mapping[str, str] | None = None,
    platform: str = sys.platform,
    root: str = "/",
    playwright=_playwright_chromium,
) -> str | None:
    """A Chromium or Chrome binary: ``$E2E_CHROMIUM``, the usual install locations of ``platform``
    (under ``root``), one on ``$PATH``, else the one Playwright installed (``playwright()``); None.

    >>> find_browser({"PATH": ""}, platform="linux", root="/nonexistent", playwright=lambda: None)
    """
    environ = os.environ if environ is None else environ
    if environ.get(BROWSER_VAR):
        return environ[BROWSER_VAR]  # used as given: a wrong path fails loudly where it is launched
    home = environ.get("HOME", "~")
    for candidate in BROWSER_PATHS.get(platform, []):
        path = os.path.join(root, candidate.replace("~", home, 1).lstrip("/"))
        if os.access(path, os.X_OK):
            return path
    for name in BROWSER_NAMES:
        if path := shutil.which(name, path=environ.get("PATH", "")):
            return path
    return playwright()


def require_browser(platform: str = sys.platform, os_release: str = "/etc/os-release", **where) -> str:
    """:func:`find_browser` (``where``: its other arguments), or fail the test with :func:`install_hint`."""
    import pytest

    executable = find_browser(platform=platform, **where)
    if executable is None:  # a failure, not a skip: a skip would hide a broken CI set-up
        pytest.fail(install_hint(platform, os_release), pytrace=False)
    return executable


def install_hint(platform: str = sys.platform, os_release: str = "/etc/os-release") -> str:
    """The one-line message for a machine without a browser, with ``platform``'s install command.

    >>> "brew install --cask chromium" in install_hint("darwin")
    True
    """
    if platform == "darwin":
        return NO_BROWSER.format(where="macOS", command=INSTALL["darwin"])
    ids: list[str] = []
    with contextlib.suppress(OSError):
        for line in Path(os_release).read_text().splitlines():
            key, _, value = line.partition("=")
            if key in ("ID", "ID_LIKE"):
                ids += value.strip('"').split()
    distro = next((i for i in ids if i in INSTALL), "linux" if platform == "linux" else None)
    where = f"{platform}, {ids[0]}" if ids else platform
    return NO_BROWSER.format(where=where, command=INSTALL.get(distro, "Chromium's installer"))


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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
