"""The browser tests' precondition (tests/e2e/browser.py): without Chromium or Playwright they
skip on a developer machine and fail under ``CI=true``, saying what is missing and how to
install it; with both they run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.e2e import browser


def executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_a_missing_chromium_skips_here_and_fails_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = tmp_path / "chromium"
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        browser.require_browser(absent)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        browser.require_browser(absent)
    message = str(failed.value)
    assert f"Chromium at {absent}" in message and "`apt-get install chromium`" in message
    assert "CI=true: this must run here, not be skipped" in message
    assert "Playwright" not in message  # only what is missing is named

    absent.write_text("not a program")  # a file that cannot be run is no browser either
    with pytest.raises(pytest.fail.Exception, match="Chromium at"):
        browser.require_browser(absent)
    assert browser.require_browser(executable(tmp_path / "chromium-ok")) == tmp_path / "chromium-ok"


def test_a_missing_playwright_fails_under_ci_naming_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    find_spec = importlib.util.find_spec

    def without_playwright(name: str, package: str | None = None) -> object:
        return None if name == "playwright" else find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_playwright)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        browser.require_browser(executable(tmp_path / "chromium"))
    message = str(failed.value)
    assert "the Playwright Python package" in message and "requirements-dev.txt" in message
    assert "Chromium at" not in message
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="Playwright"):
        browser.require_browser(executable(tmp_path / "chromium"))


def test_requirements_dev_pins_the_playwright_the_tests_import() -> None:
    """`make install` installs requirements-dev.txt: Playwright must be in it."""
    root = Path(__file__).resolve().parents[2]
    pins = (root / "requirements-dev.txt").read_text().splitlines()
    assert any(line.split("==")[0].strip().lower() == "playwright" for line in pins), pins
