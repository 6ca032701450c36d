"""Changes of ``$SB_HOME/switchboard.toml`` reach a running ``switchboard up`` without a restart
(issue 27, part 5), seen from outside: Telegram updates posted to the gateway's webhook (the
fake Bot API records the replies) and the fake model's record of the model each call named.

One stack, edited in turn: an allowlist (a sender refused before is answered after), the model
(the next call names the new one), a broken file (refused with its line in the log, the old
configuration keeps serving, a later good file applies), a setting that needs a restart (said
in the log, not applied) and SIGHUP (checks a change the poll cannot see)."""

from __future__ import annotations

import os
import shutil
import signal
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
from tests.support.stack import Stack, start_stack, stop_stack

HOOK = "/channels/telegram/default"
SECRET = "tg-reload-" + uuid.uuid4().hex
REPLY = "Hello from the fake model."
WAIT_S = 60.0  # generous: the watcher looks every second


def config(allow: str, model: str, dm_policy: str = "allowlist", body_limit: int = 0) -> str:
    gateway = f"[gateway]\nmax_request_bytes = {body_limit}\n\n" if body_limit else ""
    return (
        f'{gateway}[agent]\nmodel = "openai:{model}"\n\n'
        f'[router]\ndm_policy = "{dm_policy}"\n\n'
        f"[router.channel_security.telegram]\nallow_from = {allow}\n"
    )


def write(path: Path, text: str) -> None:
    """As an editor saves: a new file renamed over the old one."""
    temporary = path.with_name(".switchboard.toml.new")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def until(what: str, check: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(0.2)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sb-reload-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Chat:
    """Telegram users writing to the bot of a running stack."""

    def __init__(self, stack: Stack, tg: FakeTelegram, llm: FakeLLM) -> None:
        self.stack, self.tg, self.llm = stack, tg, llm
        self.updates = TelegramUpdates(SECRET, bot_username=tg.username, bot_id=tg.bot_id)

    def post(self, user: int, text: str) -> None:
        update = self.updates.message(text, user=self.updates.user(user, f"U{user}", f"u{user}"))
        body, headers = self.updates.webhook(update)
        response = httpx.post(self.stack.url + HOOK, content=body, headers=headers, timeout=10)
        assert response.status_code == 200, response.text

    def answered(self, user: int, timeout: float) -> bool:
        """Post a message as ``user``: whether a reply reached their chat within ``timeout``."""
        before = len(self.tg.sent_to(user))
        self.post(user, "hello?")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.tg.sent_to(user)) > before:
                return True
            time.sleep(0.1)
        return False

    def model_of_next_answer(self) -> str:
        calls = len(self.llm.calls)
        assert self.answered(42, 30), "the allowed sender got no answer"
        return self.llm.calls[calls:][-1].request.model

    def log(self) -> str:
        return (self.stack.home / "logs" / "services.log").read_text(encoding="utf-8")


def stack_env(llm: FakeLLM, tg: FakeTelegram) -> dict[str, str]:
    """The model's key and the bot's settings from the environment; the rest from the file."""
    return {
        "OPENAI_API_KEY": "sk-test-fake",
        "OPENAI_BASE_URL": llm.openai_base_url,
        "SB_TELEGRAM_BOT_TOKEN": tg.token,
        "SB_TELEGRAM_WEBHOOK_SECRET": SECRET,
        "SB_TELEGRAM_API_BASE": tg.base_url,
        "SB_TELEGRAM_WEBHOOK_URL": "https://bot.example.test" + HOOK,
    }


def test_allowlist_and_model_change_in_the_file_of_a_running_system(short_tmp: Path) -> None:
    home = short_tmp / "home"
    home.mkdir(mode=0o700)
    path = configfile.path_for(home)
    write(path, config('["42"]', "model-one"))
    with FakeLLM(text_only(REPLY)) as llm, FakeTelegram() as tg:
        stack = start_stack(home, stack_env(llm, tg), timeout=120)
        chat = Chat(stack, tg, llm)
        try:
            assert chat.model_of_next_answer() == "model-one"
            assert not chat.answered(43, 3), "43 is not on the allowlist yet"

            # (a) The allowlist: 43 is answered, without a restart.
            write(path, config('["42", "43"]', "model-one"))
            until("43 is answered", lambda: chat.answered(43, 2))

            # (b) The model: the next call names the new one.
            write(path, config('["42", "43"]', "model-two"))
            until("model-two answers", lambda: chat.model_of_next_answer() == "model-two")

            # (c) A broken file: refused with its line; the running configuration stays.
            write(path, config('["42"]', "model-xxx", dm_policy="opne"))
            until("the refusal is logged", lambda: f"{path}:5: router.dm_policy:" in chat.log())
            assert chat.model_of_next_answer() == "model-two"
            assert chat.answered(43, 10), "the refused file's allowlist was applied"
            # A later good file applies, except (d) what needs a restart, which says so.
            write(path, config('["42"]', "model-six", body_limit=4096))
            until("model-six answers", lambda: chat.model_of_next_answer() == "model-six")
            log = chat.log()
            assert "SB_MAX_REQUEST_BYTES changed in" in log
            assert "needs a restart of gateway" in log
            huge = {"model": "main", "messages": [{"role": "user", "content": "x" * 8192}]}
            headers = {"Authorization": f"Bearer {stack.token}"}
            response = httpx.post(
                stack.url + "/v1/chat/completions", json=huge, headers=headers, timeout=60
            )
            assert response.status_code != 413, "a restart-only setting was applied"

            # SIGHUP checks at once, even a change the poll cannot see (same size and times).
            seen = path.stat()
            path.write_text(config('["42"]', "model-hup", body_limit=4096), encoding="utf-8")
            os.utime(path, ns=(seen.st_atime_ns, seen.st_mtime_ns))
            assert chat.model_of_next_answer() == "model-six"  # a second later: not noticed
            stack.proc.send_signal(signal.SIGHUP)
            until("model-hup answers", lambda: chat.model_of_next_answer() == "model-hup")
            assert stack.proc.poll() is None, "SIGHUP stopped switchboard up"
        finally:
            assert stop_stack(stack) == []


def test_each_service_process_watches_the_file_itself(short_tmp: Path) -> None:
    """``switchboard up --processes``: the router and agent processes each apply the change;
    SIGHUP to the launcher reaches them."""
    home = short_tmp / "home"
    home.mkdir(mode=0o700)
    path = configfile.path_for(home)
    write(path, config('["42"]', "model-one"))
    with FakeLLM(text_only(REPLY)) as llm, FakeTelegram() as tg:
        stack = start_stack(home, stack_env(llm, tg), timeout=120, args=["--processes"])
        chat = Chat(stack, tg, llm)
        try:
            assert chat.model_of_next_answer() == "model-one"
            write(path, config('["42", "43"]', "model-two"))
            until("43 is answered", lambda: chat.answered(43, 2))
            until("model-two answers", lambda: chat.model_of_next_answer() == "model-two")
            seen = path.stat()
            path.write_text(config('["42", "43"]', "model-hup"), encoding="utf-8")
            os.utime(path, ns=(seen.st_atime_ns, seen.st_mtime_ns))
            assert chat.model_of_next_answer() == "model-two"
            stack.proc.send_signal(signal.SIGHUP)
            until("model-hup answers", lambda: chat.model_of_next_answer() == "model-hup")
            assert stack.proc.poll() is None, "SIGHUP stopped switchboard up"
        finally:
            assert stop_stack(stack) == []
