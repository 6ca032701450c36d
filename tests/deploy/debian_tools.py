"""promtool and prometheus come from Debian's ``prometheus`` package (``make install`` installs
it where it can): without them their tests skip on a developer machine and fail under
``CI=true``."""

from __future__ import annotations

import os
import shutil

import pytest


def prometheus_tool(name: str) -> str:
    """The path of ``promtool`` or ``prometheus``; skip (fail under CI=true) without it."""
    found = shutil.which(name)
    if found:
        return found
    reason = f"{name} is not installed (apt-get install prometheus; `make install` does it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: this must run here, not be skipped)", pytrace=False)
    pytest.skip(reason)
