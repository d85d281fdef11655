"""Plugin (registered in the root conftest.py, so that the xdist controller has it too): where the browser
test's screenshots go, and the per-notebook lines printed at the end (each xdist worker hands its lines
to the controller, which prints them all)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_LINES = pytest.StashKey[list]()
_DIRS = pytest.StashKey[list]()
_WORKER_OUTPUT = "jupyterlab_in_chromium"


@pytest.fixture(scope="session")
def screenshot_dir(request) -> Path:
    """A fresh temporary directory (or $E2E_SCREENSHOTS), kept after the run so it can be looked at."""
    chosen = os.environ.get("E2E_SCREENSHOTS")
    path = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="e2e-screenshots-"))
    path.mkdir(parents=True, exist_ok=True)
    request.config.stash.setdefault(_DIRS, []).append(str(path))
    return path


@pytest.fixture(scope="session")
def e2e_report(request) -> list[str]:
    return request.config.stash.setdefault(_LINES, [])


def pytest_sessionfinish(session):
    config = session.config
    if hasattr(config, "workeroutput") and _DIRS in config.stash:
        config.workeroutput[_WORKER_OUTPUT] = (config.stash[_DIRS], config.stash.get(_LINES, []))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    dirs, lines = node.workeroutput.get(_WORKER_OUTPUT, ([], []))
    node.config.stash.setdefault(_DIRS, []).extend(dirs)
    node.config.stash.setdefault(_LINES, []).extend(lines)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _DIRS not in config.stash:
        return
    terminalreporter.section("JupyterLab in Chromium")
    for line in sorted(config.stash.get(_LINES, [])):
        terminalreporter.write_line(line)
    for path in sorted(set(config.stash[_DIRS])):
        terminalreporter.write_line(f"screenshots: {path}")
