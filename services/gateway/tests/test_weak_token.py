"""The gateway refuses to start with a weak or default token (``change-me``, short ones), in one
line that names the setting and the reason and never echoes the value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from switchboard.settings import describe
from switchboard.tokens import generate
from switchboard_gateway.config import GatewaySettings

from .gateway_harness import absent_address

REFUSED = {"change-me": "well-known default", "Xk9-short-1": "shorter than 24 characters"}


@pytest.mark.parametrize(("token", "why"), REFUSED.items())
def test_the_gateway_process_refuses_to_start(tmp_path: Path, token: str, why: str) -> None:
    with absent_address() as nowhere:  # nothing to connect to: it must stop before trying
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SB_")},
            "SB_HOME": str(tmp_path),
            "SB_GATEWAY_TOKEN": token,
            "SB_NATS_URL": f"nats://{nowhere}",
        }
        done = subprocess.run(
            [sys.executable, "-m", "switchboard_gateway"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode != 0
    [line] = done.stderr.strip().splitlines()
    assert "SB_GATEWAY_TOKEN is too weak" in line and why in line, line
    assert token not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("token", ["change-me", "changeme", "password", "a" * 40, "sh0rt-t0k3n"])
def test_the_settings_refuse_weak_tokens(token: str) -> None:
    with pytest.raises(ValidationError) as raised:
        GatewaySettings.from_environ({"SB_GATEWAY_TOKEN": token})
    assert "SB_GATEWAY_TOKEN is too weak" in describe(raised.value)
    assert token not in describe(raised.value)
    assert token not in str(raised.value)


def test_a_strong_token_and_no_token_are_accepted_by_the_settings() -> None:
    token = generate()
    assert (
        GatewaySettings.from_environ({"SB_GATEWAY_TOKEN": token}).gateway_token.get_secret_value()
        == token
    )
    # No token: settings are valid (serve() refuses to serve without one).
    assert GatewaySettings.from_environ({}).gateway_token.get_secret_value() == ""
