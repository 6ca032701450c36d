"""``switchboard onboard --non-interactive`` (issue 27, part 3) as a script runs it: the real
command in a subprocess, its credentials checked against fake provider and platform servers
that speak the real wire formats. A refused credential stops it before anything is written."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, text_only
from tests.fakes.slack import FakeSlack

SCRIPT = Path(sys.executable).parent / "switchboard"
KEY = "sk-onboard-" + os.urandom(12).hex()


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(text_only(), require_key=KEY) as fake:
        yield fake


def clean() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if not k.startswith(("SB_", "OPENAI_", "ANTHROPIC_"))
    }


def onboard(
    home: Path, llm: FakeLLM, *flags: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    apis = {"OPENAI_BASE_URL": llm.openai_base_url, "MODEL_KEY": KEY}
    return subprocess.run(
        [str(SCRIPT), "onboard", "--home", str(home), "--non-interactive", *flags],
        env={**clean(), **apis, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


MODEL = ("--provider", "openai", "--api-key-env", "MODEL_KEY", "--model", "gpt-4o-mini")


def test_a_refused_token_exits_non_zero_and_writes_nothing(tmp_path: Path, llm: FakeLLM) -> None:
    with FakeSlack() as slack:
        env = {"SB_SLACK_API_BASE": slack.base_url, "BOT": "xoxb-not-the-token", "SIGN": "s" * 40}
        flags = ("--channel", "slack", "--token-env", "BOT", "--signing-secret-env", "SIGN")
        result = onboard(tmp_path, llm, *MODEL, *flags, env=env)
    assert result.returncode == 1
    assert "slack" in result.stderr and "refused the token (invalid_auth)" in result.stderr
    assert "nothing was written" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no file, no secrets/
    assert KEY not in result.stdout + result.stderr


def test_a_refused_key_exits_non_zero_and_writes_nothing(tmp_path: Path, llm: FakeLLM) -> None:
    result = onboard(tmp_path, llm, *MODEL, env={"MODEL_KEY": "sk-wrong-" + "x" * 20})
    assert result.returncode == 1
    assert "refused the key (HTTP 401)" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_flags_write_a_file_config_validate_accepts(tmp_path: Path, llm: FakeLLM) -> None:
    home = tmp_path / "home"
    with FakeDiscord() as discord:
        token_file = tmp_path / "discord.token"
        token_file.write_text(discord.token + "\n")
        flags: tuple[str, ...] = ("--channel", "discord", "--token-file", str(token_file))
        flags += ("--public-key", "ab" * 32, "--owner", "123456789012345678")
        env = {"SB_DISCORD_API_BASE": discord.base_url}
        result = onboard(home, llm, *MODEL, *flags, env=env)
        shown = result.stdout + result.stderr
        assert result.returncode == 0, shown
        for value in (KEY, discord.token):
            assert value not in shown
        text = (home / "switchboard.toml").read_text()
        assert discord.token not in text and KEY not in text
        assert f'discord_application_id = "{discord.bot_id}"' in text  # from users/@me
        assert 'owners = ["discord:123456789012345678"]' in text
        assert 'model = "openai:gpt-4o-mini"' in text
        for name, value in (("openai_api_key", KEY), ("discord_bot_token", discord.token)):
            stored = home / "secrets" / name
            assert stat.S_IMODE(stored.stat().st_mode) == 0o600
            assert stored.read_text().strip() == value
    validated = subprocess.run(
        [str(SCRIPT), "config", "validate", "--home", str(home)],
        env=clean(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert validated.returncode == 0, validated.stderr


def test_an_existing_file_is_replaced_only_with_force(tmp_path: Path, llm: FakeLLM) -> None:
    old = "# mine\nlog_level = 'DEBUG'\n"
    (tmp_path / "switchboard.toml").write_text(old)
    result = onboard(tmp_path, llm, *MODEL)
    assert result.returncode == 2 and "--force replaces it" in result.stderr
    assert (tmp_path / "switchboard.toml").read_text() == old
    result = onboard(tmp_path, llm, *MODEL, "--force")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "switchboard.toml.bak").read_text() == old
    assert "log_level" not in (tmp_path / "switchboard.toml").read_text()


def test_a_secret_comes_from_the_environment_or_a_file(tmp_path: Path, llm: FakeLLM) -> None:
    result = onboard(tmp_path, llm, "--provider", "openai", "--api-key-env", "UNSET_VARIABLE")
    assert result.returncode == 2
    assert "--api-key-env UNSET_VARIABLE: that environment variable is not set" in result.stderr
    result = onboard(tmp_path, llm, "--provider", "openai")
    assert result.returncode == 2 and "--api-key-env NAME or --api-key-file PATH" in result.stderr
    assert list(tmp_path.iterdir()) == []
