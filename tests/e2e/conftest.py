"""Shared by the browser tests: where screenshots go, and the per-notebook lines printed at the end."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_LINES = pytest.StashKey[list]()
_DIR = pytest.StashKey[Path]()


@pytest.fixture(scope="session")
def screenshot_dir(request) -> Path:
    """A fresh temporary directory (or $E2E_SCREENSHOTS), kept after the run so it can be looked at."""
    chosen = os.environ.get("E2E_SCREENSHOTS")
    path = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="e2e-screenshots-"))
    path.mkdir(parents=True, exist_ok=True)
    request.config.stash[_DIR] = path
    return path


@pytest.fixture(scope="session")
def e2e_report(request) -> list[str]:
    return request.config.stash.setdefault(_LINES, [])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _DIR not in config.stash:
        return
    terminalreporter.section("JupyterLab in Chromium")
    for line in config.stash.get(_LINES, []):
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"screenshots: {config.stash[_DIR]}")
