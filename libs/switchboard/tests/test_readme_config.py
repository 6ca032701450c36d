"""The README's tour configures Switchboard through its file (issue 27): the file it shows is
valid as written, and its `switchboard config` commands run as written (in a home of their own,
``~`` a temporary directory) and give the settings the tour says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from switchboard.configfile.load import load

README = Path(__file__).resolve().parents[3] / "README.md"
BIN = Path(sys.executable).parent
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(kind: str) -> list[str]:
    return [body for found, body in BLOCK.findall(README.read_text()) if found == kind]


def environment(home: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SB_", "OPENAI_", "OTEL_"))}
    return {**clean, "HOME": str(home)}


def test_the_file_the_tour_shows_is_valid(tmp_path: Path) -> None:
    [shown] = [b for b in blocks("toml") if "switchboard.toml" in b]
    data = tmp_path / ".switchboard"
    (data / "secrets").mkdir(parents=True)
    key = data / "secrets" / "openai.key"
    key.write_text("sk-test-" + "x" * 40 + "\n")
    key.chmod(0o600)
    (data / "switchboard.toml").write_text(shown)
    loaded = load(data / "switchboard.toml", {})
    assert loaded.environ["SB_MODEL"] == "openai:gpt-4o-mini"
    assert loaded.environ["OPENAI_API_KEY"] == "sk-test-" + "x" * 40


def test_the_tours_config_commands_run_as_written(tmp_path: Path) -> None:
    lines = [
        line
        for block in blocks("sh")
        for line in block.splitlines()
        if "switchboard config set" in line or "~/.switchboard/secrets" in line
    ]
    assert len(lines) >= 4, lines  # the Telegram token (a file, its name), its mode, a group
    (tmp_path / ".switchboard" / "secrets").mkdir(parents=True)
    script = "set -e\n" + "\n".join(lines).replace(".venv/bin/", f"{BIN}/")
    done = subprocess.run(
        ["bash", "-c", script],
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    token = tmp_path / ".switchboard" / "secrets" / "telegram.token"
    assert token.stat().st_mode & 0o077 == 0
    environ = load(tmp_path / ".switchboard" / "switchboard.toml", {}).environ
    assert environ["SB_TELEGRAM_BOT_TOKEN"] == "123456:ABC..."
    assert environ["SB_TELEGRAM_MODE"] == "polling"
    security = json.loads(environ["SB_CHANNEL_SECURITY"])
    assert security == {"telegram": {"groups": ["-1001234567890"]}}
