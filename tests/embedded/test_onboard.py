"""``switchboard onboard`` driven as a person would (issue 27, part 3): the real entry point in a
pseudo-terminal, against fake Anthropic and Telegram servers that speak the real wire formats.
A refused key and a refused token are asked again; the file it writes passes ``switchboard
config validate``; ``switchboard up`` runs with it and answers a chat with the key the wizard
stored; and no secret ever appears in what the terminal showed."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pexpect
import pytest

from switchboard import configfile
from tests.fakes.llm import FakeLLM, text_only
from tests.fakes.telegram import FakeTelegram
from tests.support.stack import start_stack, stop_stack
from tests.support.workers import base_env

SWITCHBOARD = str(Path(sys.executable).parent / "switchboard")
REPLY = "Hello from the fake model, configured by the wizard."
PUBLIC_URL = "https://bot.example.test"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sb-onboard-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _answer(child: pexpect.spawn, prompt: str, reply: str) -> None:
    child.expect(prompt)
    child.sendline(reply)


def test_wizard_writes_a_file_that_up_runs_with(short_tmp: Path) -> None:
    key = "sk-ant-wizard-" + os.urandom(12).hex()
    wrong_key = "sk-ant-wrong-" + os.urandom(12).hex()
    wrong_token = "7000000001:AAH-not_the_bot_token-" + os.urandom(8).hex()
    home = short_tmp / "home"
    with FakeLLM(text_only(REPLY), require_key=key) as llm, FakeTelegram() as telegram:
        # The providers' base URLs as the services read them: the wizard checks against them.
        apis = {"ANTHROPIC_BASE_URL": llm.base_url, "SB_TELEGRAM_API_BASE": telegram.base_url}
        transcript = io.StringIO()
        child = pexpect.spawn(
            SWITCHBOARD,
            ["onboard", "--home", str(home)],
            env={**base_env(), **apis},
            encoding="utf-8",
            timeout=60,
        )
        child.logfile_read = transcript
        try:
            child.expect("Which model provider")
            _answer(child, r"Choose \[1\]: ", "1")
            _answer(child, r"API key \(not shown\): ", wrong_key)
            child.expect("refused the key")
            _answer(child, r"API key \(not shown\): ", key)
            child.expect("the key works")
            _answer(child, r"Model \(empty: Switchboard's default\): ", "claude-sonnet-4-5")
            child.expect("Which chat channel")
            _answer(child, r"Choose \[1\]: ", "1")
            _answer(child, r"bot token \(not shown\): ", wrong_token)
            child.expect("refused the token")
            _answer(child, r"bot token \(not shown\): ", telegram.token)
            child.expect("the bot is @")
            _answer(child, r"Choose \[2\]: ", "1")  # webhook
            _answer(child, r"public https URL.*: ", PUBLIC_URL)
            _answer(child, r"Your user id: ", "4242")
            _answer(child, r"Choose \[1\]: ", "")  # pairing, the default
            child.expect(r"Sandbox: (OK|WARN)")
            child.expect("Summary:")
            _answer(child, r"Write it\? \(y/n\) \[y\]: ", "y")
            child.expect("Wrote ")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        shown = transcript.getvalue()
        assert child.exitstatus == 0, shown
        for secret in (key, wrong_key, telegram.token, wrong_token):
            assert secret not in shown

        path = configfile.path_for(home)
        text = path.read_text(encoding="utf-8")
        for secret in (key, telegram.token):
            assert secret not in text  # references only: the values are in secrets/
        assert 'owners = ["telegram:4242"]' in text
        for name in ("anthropic_api_key", "telegram_bot_token", "telegram_webhook_secret"):
            secret_file = home / "secrets" / name
            assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
        assert (home / "secrets" / "anthropic_api_key").read_text().strip() == key
        validated = subprocess.run(
            [SWITCHBOARD, "config", "validate", "--home", str(home)],
            env=base_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert validated.returncode == 0, validated.stderr

        stack = start_stack(home, apis, timeout=120)
        try:
            # The gateway read the file's Telegram settings: it registered the webhook.
            assert telegram.webhook.get("url") == f"{PUBLIC_URL}/channels/telegram/default"
            body = {"model": "switchboard", "messages": [{"role": "user", "content": "hello"}]}
            headers = {"Authorization": f"Bearer {stack.token}"}
            with httpx.Client(base_url=stack.url, headers=headers, timeout=60) as client:
                answer = client.post("/v1/chat/completions", json=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == REPLY
            # The fake refuses any other key: the agent used the one the wizard stored, and
            # the model it chose.
            last = llm.calls[-1]
            assert (last.status, last.request.model) == (200, "claude-sonnet-4-5")
        finally:
            assert stop_stack(stack) == []
