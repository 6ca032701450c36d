"""Telegram end to end: every service as a real process, the gateway configured by
SB_TELEGRAM_* against the fake Bot API, the agent against the fake model (a tool call, then
text). A real-format Update POSTed to the gateway's webhook with Telegram's secret header is
answered with one sendMessage in its chat, however often Telegram retries the update; a 429's
retry_after is waited out; a Bot API down for every attempt dead-letters the reply."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest

from tests.e2e.helpers import metric, wait_for
from tests.fakes.llm import FakeLLM, tool_then_text
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.lanes.pipeline import wait_settled
from tests.support.services import ServiceProcesses, with_fake_model

HOOK = "/channels/telegram/default"
WEBHOOK_URL = "https://bot.example.com/channels/telegram/default"
SECRET = "tg-e2e-" + uuid.uuid4().hex
MAX_ATTEMPTS = 3


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def updates(tg: FakeTelegram) -> TelegramUpdates:
    return TelegramUpdates(SECRET, bot_username=tg.username, bot_id=tg.bot_id)


@pytest.fixture
def services(
    tmp_path: Path, nats_url: str, database_url: str, tg: FakeTelegram
) -> Iterator[ServiceProcesses]:
    env = {
        "SB_TELEGRAM_BOT_TOKEN": tg.token,
        "SB_TELEGRAM_WEBHOOK_SECRET": SECRET,
        "SB_TELEGRAM_API_BASE": tg.base_url,
        "SB_TELEGRAM_WEBHOOK_URL": WEBHOOK_URL,
        "SB_OUTBOUND_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
        "SB_LOG_LEVEL": "INFO",
        "SB_TELEGRAM_GROUPS": '["-1001234"]',  # groups are closed by default (docs/trust.md)
    }
    with with_fake_model(tmp_path, nats_url, database_url, tool_then_text(), env) as procs:
        yield procs


def post(services: ServiceProcesses, updates: TelegramUpdates, update: dict[str, Any]) -> None:
    """POST an Update as Telegram does; it must get its 200."""
    body, headers = updates.webhook(update)
    response = httpx.post(services.url + HOOK, content=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json() == {"ok": True}


def all_delivered(nats_url: str, timeout: float = 60.0) -> None:
    """Until every message so far is routed and answered, and OUTBOUND (a work queue) is empty:
    every reply part sent (or dead-lettered) and acknowledged."""

    async def run() -> None:
        nc = await nats.connect(nats_url)
        try:
            js = nc.jetstream()
            await wait_settled(js, timeout)
            deadline = time.monotonic() + timeout
            while (await js.stream_info("OUTBOUND")).state.messages:
                assert time.monotonic() < deadline, "OUTBOUND never emptied"
                await asyncio.sleep(0.1)
        finally:
            await nc.close()

    asyncio.run(run())


def gateway_metric(services: ServiceProcesses, name: str, **labels: str) -> float:
    url = f"http://127.0.0.1:{services.ops_ports['gateway']}/metrics"
    return metric(httpx.get(url, timeout=5).text, name, **labels)


def test_a_message_is_answered_once_and_failures_are_retried_or_dead_lettered(
    services: ServiceProcesses, tg: FakeTelegram, updates: TelegramUpdates
) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    nats_url = services.env["SB_NATS_URL"]
    # At start the gateway learned its bot (getMe) and registered the webhook with the secret.
    assert [c.method for c in tg.calls][:2] == ["getMe", "setWebhook"]
    assert tg.webhook == {
        "url": WEBHOOK_URL,
        "secret_token": SECRET,
        "allowed_updates": ["message", "edited_message", "callback_query"],
    }

    # A DM, and Telegram's retries of the same update (before and after the reply went out).
    ada = updates.user(4242)
    update = updates.message("what time is it?", user=ada)
    # The model takes a moment, as real ones do: typing shows while a run is active, and an
    # instant fake's run can end before the gateway's first typing call goes out.
    llm.stream_delay_s = 0.5
    post(services, updates, update)
    post(services, updates, update)
    [reply] = tg.wait_for_sent(1)
    post(services, updates, update)
    all_delivered(nats_url)
    assert tg.sent == [reply]  # exactly once
    assert (reply.chat_id, reply.parse_mode) == (4242, "HTML")
    assert reply.text.startswith("Tool said: ")
    assert len(llm.calls) == 2  # one run: the tool call, then the text
    assert llm.calls[0].request.last_user_text.endswith("what time is it?")
    assert (4242, "typing", None) in tg.actions  # while the agent was writing
    llm.stream_delay_s = 0.0

    # In a group the bot answers only when mentioned; a group not listed gets nothing.
    group = updates.group(-1001234)
    post(services, updates, updates.message("just chatting", chat=group, user=ada))
    stranger = updates.group(-1009999)
    post(services, updates, updates.message("@switchboard_test_bot hi", chat=stranger, user=ada))
    all_delivered(nats_url)
    post(services, updates, updates.message("@switchboard_test_bot time?", chat=group, user=ada))
    wait_for(lambda: tg.sent_to(-1001234), timeout=60, what="the group's reply")
    all_delivered(nats_url)
    assert len(tg.sent_to(-1001234)) == 1 and len(llm.calls) == 4
    assert tg.sent_to(-1009999) == []

    # Telegram rate-limits the bot: the reply waits out retry_after, then goes once.
    tg.fail_next("sendMessage", 429, retry_after=2)
    post(services, updates, updates.message("and the date?", user=updates.user(5151)))
    wait_for(lambda: tg.sent_to(5151), timeout=60, what="the reply after the 429")
    all_delivered(nats_url)
    assert len(tg.sent_to(5151)) == 1
    limited, sent = [c for c in tg.attempts() if c.params.get("chat_id") == 5151]
    assert (limited.status, sent.status) == (429, 200)
    assert sent.at - limited.at >= 1.95, "the retry came before retry_after passed"

    # The Bot API is down for every attempt: the part is dead-lettered after MAX_ATTEMPTS.
    tg.fail_always("sendMessage", 500)
    post(services, updates, updates.message("anyone there?", user=updates.user(6161)))
    wait_for(
        lambda: (
            gateway_metric(
                services, "sb_outbound_messages_total", channel="telegram", outcome="dead_letter"
            )
            == 1
        ),
        timeout=90,
        what="the dead letter",
    )
    all_delivered(nats_url)
    tries = [c for c in tg.attempts() if c.params.get("chat_id") == 6161]
    assert [c.status for c in tries] == [500] * MAX_ATTEMPTS
    assert tg.sent_to(6161) == []

    # The bot token never reached the gateway's log.
    log = (services.home / "logs" / "gateway.log").read_text(errors="replace")
    assert tg.token.partition(":")[2] not in log


async def inbound_count(nats_url: str) -> int:
    nc = await nats.connect(nats_url)
    try:
        return int((await nc.jetstream().stream_info("INBOUND")).state.messages)
    finally:
        await nc.close()


def test_a_gateway_killed_between_receipt_and_answer_still_gives_one_run_and_one_reply(
    services: ServiceProcesses, tg: FakeTelegram, updates: TelegramUpdates
) -> None:
    """The update is on INBOUND but Telegram never reads the gateway's answer (SIGKILL): it
    retries the update on the restarted gateway, and the chat still gets one reply from one
    run."""
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    nats_url = services.env["SB_NATS_URL"]
    before = asyncio.run(inbound_count(nats_url))
    # The run must still be thinking when the gateway dies: an instant fake's reply could be
    # on its way out already under load, and a gateway killed between the platform's answer
    # and its sent-mark sends that message again (delivery.py says so; not what this tests).
    llm.stream_delay_s = 0.5
    update = updates.message("what time is it?", user=updates.user(7373))
    body, headers = updates.webhook(update)
    lines = [f"POST {HOOK} HTTP/1.1", f"Host: 127.0.0.1:{services.http_port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()] + [f"Content-Length: {len(body)}"]
    with socket.create_connection(("127.0.0.1", services.http_port), timeout=10) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        wait_for(
            lambda: asyncio.run(inbound_count(nats_url)) > before,
            timeout=30,
            what="the update on INBOUND",
        )
        services.kill("gateway")  # the answer, if written, is never read
    services.restart("gateway")
    post(services, updates, update)  # Telegram's retry
    wait_for(lambda: tg.sent_to(7373), timeout=60, what="the reply")
    all_delivered(nats_url)
    llm.stream_delay_s = 0.0
    assert len(tg.sent_to(7373)) == 1
    assert len(llm.calls) == 2  # one run: the tool call, then the text
