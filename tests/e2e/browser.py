"""What the browser tests share (WebChat in Debian's Chromium driven by Playwright): the browser,
its arguments, the wait bound, and the check that both are there, which skips on a developer
machine without them but fails under ``CI=true``, where ``make install`` provides them and a
skip would hide a broken page (as the sandbox tests do: services/tools/tests/sandbox_checks.py).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

# Debian's package (`apt-get install chromium`, which `make install` runs as root); Playwright
# is told to use it (executable_path), so no browser of its own is downloaded.
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 60_000  # generous bound on the run (services, fake model, tool executor)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def missing(chromium: Path | None = None) -> list[str]:
    """What a browser test lacks on this host (``chromium``: default :data:`CHROMIUM`), each
    with how to install it; empty: nothing."""
    chromium = chromium or CHROMIUM
    problems = []
    if importlib.util.find_spec("playwright") is None:
        problems.append(
            "the Playwright Python package (pinned in requirements-dev.txt: `make install`, "
            "or `.venv/bin/pip install -r requirements-dev.txt`)"
        )
    if not (chromium.is_file() and os.access(chromium, os.X_OK)):
        problems.append(
            f"Chromium at {chromium} (`apt-get install chromium` as root; `make install` "
            "runs it when it is root on a system with apt-get)"
        )
    return problems


def require_browser(chromium: Path | None = None) -> Path:
    """``chromium`` (default :data:`CHROMIUM`), once Playwright and it are there. Without
    them: skip, or under ``CI=true`` fail, naming what is missing and how to install it."""
    chromium = chromium or CHROMIUM
    problems = missing(chromium)
    if problems:
        reason = "the browser test needs " + " and ".join(problems)
        if in_ci():
            pytest.fail(f"{reason} (CI=true: this must run here, not be skipped)", pytrace=False)
        pytest.skip(reason)
    return chromium
