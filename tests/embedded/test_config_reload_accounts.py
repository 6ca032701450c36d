"""Channel accounts added to and removed from ``$SB_HOME/switchboard.toml`` reach a running
``switchboard up`` without a restart (issue 27, part 5), seen from outside: a second Telegram
bot's webhook is 404 until the file names it, then its updates are answered through that bot
(its own fake Bot API records the reply), and 404 again once the file drops it, while the first
bot answers throughout."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from switchboard import configfile
from tests.fakes.llm import FakeLLM, text_only
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.support.stack import start_stack, stop_stack

HOME_SECRET = "tg-home-" + uuid.uuid4().hex
WORK_SECRET = "tg-work-" + uuid.uuid4().hex
WORK_TOKEN = "7000000042:AAH-fake_telegram_token-work0123456789abcd"
REPLY = "Hello from the fake model."
WAIT_S = 60.0  # generous: the watcher looks every second

BASE = (
    '[agent]\nmodel = "openai:model-one"\n\n'
    '[router]\ndm_policy = "allowlist"\n\n'
    '[router.channel_security.telegram]\nallow_from = ["42"]\n'
)


def with_work(api_base: str) -> str:
    return BASE + (
        "\n[gateway.telegram_accounts.work]\n"
        'bot_token = "env:WORK_BOT_TOKEN"\n'
        f'webhook_secret = "{WORK_SECRET}"\n'
        f'api_base = "{api_base}"\n'
    )


def write(path: Path, text: str) -> None:
    """As an editor saves: a new file (0600: it holds a secret) renamed over the old one."""
    temporary = path.with_name(".switchboard.toml.new")
    temporary.write_text(text, encoding="utf-8")
    temporary.chmod(0o600)
    os.replace(temporary, path)


def until(what: str, check: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(0.2)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sb-accounts-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_telegram_bot_added_to_and_removed_from_the_file_of_a_running_system(
    short_tmp: Path,
) -> None:
    home = short_tmp / "home"
    home.mkdir(mode=0o700)
    path = configfile.path_for(home)
    write(path, BASE)
    with (
        FakeLLM(text_only(REPLY)) as llm,
        FakeTelegram() as first,
        FakeTelegram(WORK_TOKEN, "work_bot") as work,
    ):
        env = {
            "OPENAI_API_KEY": "sk-test-fake",
            "OPENAI_BASE_URL": llm.openai_base_url,
            "SB_TELEGRAM_BOT_TOKEN": first.token,
            "SB_TELEGRAM_WEBHOOK_SECRET": HOME_SECRET,
            "SB_TELEGRAM_API_BASE": first.base_url,
            "WORK_BOT_TOKEN": WORK_TOKEN,
        }
        stack = start_stack(home, env, timeout=120)
        to_first = TelegramUpdates(HOME_SECRET, bot_username=first.username, bot_id=first.bot_id)
        to_work = TelegramUpdates(WORK_SECRET, bot_username=work.username, bot_id=work.bot_id)

        def post(account: str, updates: TelegramUpdates) -> int:
            update = updates.message("hello?", user=updates.user(42, "U42", "u42"))
            body, headers = updates.webhook(update)
            url = f"{stack.url}/channels/telegram/{account}"
            return httpx.post(url, content=body, headers=headers, timeout=10).status_code

        def answered(fake: FakeTelegram, count: int) -> bool:
            return len(fake.sent_to(42)) >= count

        try:
            assert post("default", to_first) == 200
            until("the first bot answers", lambda: answered(first, 1))
            assert post("work", to_work) == 404

            write(path, with_work(work.base_url))
            until("the work bot's webhook is served", lambda: post("work", to_work) == 200)
            until("the work bot answers", lambda: answered(work, 1))
            assert len(first.sent_to(42)) == 1  # the reply left through the bot it came in on

            write(path, BASE)
            until("the work bot's webhook is gone", lambda: post("work", to_work) == 404)
            assert post("default", to_first) == 200
            until("the first bot still answers", lambda: answered(first, 2))
            log = (home / "logs" / "services.log").read_text(encoding="utf-8")
            assert "telegram account 'work' added" in log
            assert "telegram account 'work' removed" in log
            assert "needs a restart of gateway" not in log
            assert WORK_TOKEN.split(":")[1] not in log
        finally:
            assert stop_stack(stack) == []
