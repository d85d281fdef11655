"""The browser test finds a browser where people have one (never downloading one), and where there is
none it fails with one line that says how to install one on this platform."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import lab


def _plant(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def _none() -> None:
    return None


@pytest.mark.parametrize(
    ("platform", "command"),
    [("linux", "`sudo apt-get install -y chromium`"), ("darwin", "`brew install --cask chromium`")],
)
def test_every_browser_hidden_fails_with_the_install_line(platform, command, tmp_path):
    release = tmp_path / "os-release"
    release.write_text("ID=debian\n")
    hidden = {"PATH": str(tmp_path / "empty"), "HOME": str(tmp_path)}
    with pytest.raises(pytest.fail.Exception) as failed:
        lab.require_browser(
            environ=hidden, platform=platform, os_release=str(release), root=str(tmp_path), playwright=_none
        )
    message = str(failed.value)
    assert "\n" not in message and command in message
    assert "`python -m playwright install chromium`" in message and "E2E_CHROMIUM" in message


@pytest.mark.parametrize(
    ("os_release", "command"),
    [
        ("ID=debian\n", "`sudo apt-get install -y chromium`"),
        ("ID=ubuntu\nID_LIKE=debian\n", "`sudo snap install chromium`"),
        ('ID="fedora"\n', "`sudo dnf install -y chromium`"),
        ('ID="rocky"\nID_LIKE="rhel centos fedora"\n', "`sudo dnf install -y chromium`"),
        ("ID=arch\n", "`sudo pacman -S chromium`"),
        ("ID=nixos\n", "your distribution's `chromium` package"),
    ],
)
def test_the_install_line_names_the_distributions_command(os_release, command, tmp_path):
    release = tmp_path / "os-release"
    release.write_text(os_release)
    message = lab.install_hint("linux", os_release=str(release))
    assert command in message and "python -m playwright install chromium" in message
    assert "E2E_CHROMIUM" in message and "-m 'not browser'" in message


def test_e2e_chromium_wins(tmp_path):
    chosen = _plant(tmp_path / "my" / "chrome")
    _plant(tmp_path / "usr/bin/chromium")
    environ = {"E2E_CHROMIUM": chosen, "PATH": ""}
    assert lab.find_browser(environ, platform="linux", root=str(tmp_path), playwright=_none) == chosen


@pytest.mark.parametrize(
    ("platform", "where"),
    [
        ("linux", "usr/bin/chromium"),
        ("linux", "usr/bin/chromium-browser"),
        ("linux", "snap/bin/chromium"),
        ("linux", "opt/google/chrome/chrome"),
        ("darwin", "Applications/Google Chrome.app/Contents/MacOS/Google Chrome"),
        ("darwin", "home/Applications/Chromium.app/Contents/MacOS/Chromium"),
    ],
)
def test_the_usual_install_locations_are_found(platform, where, tmp_path):
    planted = _plant(tmp_path / where)
    environ = {"PATH": "", "HOME": "/home"}
    assert lab.find_browser(environ, platform=platform, root=str(tmp_path), playwright=_none) == planted


def test_a_browser_on_the_path_is_found(tmp_path):
    planted = _plant(tmp_path / "bin" / "google-chrome")
    environ = {"PATH": str(tmp_path / "bin")}
    assert lab.find_browser(environ, platform="linux", root=str(tmp_path / "x"), playwright=_none) == planted


def test_playwright_is_asked_last_and_only_for_an_installed_browser(tmp_path, monkeypatch):
    environ = {"PATH": ""}
    assert lab.find_browser(environ, platform="linux", root=str(tmp_path), playwright=lambda: "/pw") == "/pw"
    # Playwright's own lookup: nothing in an empty browsers folder, and nothing is downloaded.
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "ms-playwright"))
    assert lab._playwright_chromium() is None
    assert not (tmp_path / "ms-playwright").exists()
