"""Telegram inbound: the gateway (in-process, on a real nats-server) with the real Telegram
adapter, started against the fake Bot API, fed real-format Updates carrying Telegram's
``X-Telegram-Bot-Api-Secret-Token``: published once under a chat-scoped id; refused and
malformed calls publish nothing. Each kind of message is in test_telegram_parse.py, formatting
and sending in test_telegram_format.py and test_telegram_send.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchboard import registry
from switchboard.errors import ConfigError
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.app import create_app
from switchboard_gateway.channels import configured_adapters, telegram
from switchboard_gateway.channels.base import InboundRequest, Unauthorized
from switchboard_gateway.channels.telegram import TelegramAdapter, from_settings
from switchboard_gateway.channels.telegram_inbound import BotInfo
from switchboard_gateway.config import GatewaySettings
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.support.streams import stored as stream_messages

from .gateway_harness import absent_address, client_on

HOOK = "/channels/telegram/default"
SECRET = "tg-webhook-" + uuid.uuid4().hex
GATEWAY_TOKEN = f"gw-{uuid.uuid4().hex}"


@dataclass
class TelegramGateway:
    rt: ServiceRuntime
    client: httpx.AsyncClient
    adapter: TelegramAdapter
    updates: TelegramUpdates

    async def post(self, update: object, secret: str | None = None) -> httpx.Response:
        body, headers = self.updates.webhook(update, secret)
        return await self.client.post(HOOK, content=body, headers=headers)

    async def inbound(self) -> list[tuple[str, messages_pb2.InboundMessage]]:
        """(Nats-Msg-Id, message) of everything INBOUND holds."""
        stream = self.rt.subjects.stream("INBOUND")
        found = await stream_messages(self.rt.js, stream, messages_pb2.InboundMessage)
        return [(s.msg_id, s.message) for s in found]


def settings_for(home: Path, **values: Any) -> GatewaySettings:
    return GatewaySettings.from_environ(
        {}, home=home, gateway_token=GATEWAY_TOKEN, log_json=False, **values
    )


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def updates(tg: FakeTelegram) -> TelegramUpdates:
    return TelegramUpdates(SECRET, bot_username=tg.username, bot_id=tg.bot_id)


@pytest.fixture
async def gw(
    nats_url: str, tmp_path: Path, tg: FakeTelegram, updates: TelegramUpdates
) -> AsyncIterator[TelegramGateway]:
    with absent_address() as agent_addr:
        settings = settings_for(
            tmp_path,
            nats_url=nats_url,
            agent_addr=agent_addr,
            telegram_bot_token=tg.token,
            telegram_webhook_secret=SECRET,
            telegram_api_base=tg.base_url,
        )
        adapters = configured_adapters(settings)
        adapter = adapters["telegram"]
        assert isinstance(adapter, TelegramAdapter)
        async with ServiceRuntime(registry.get("gateway"), settings, asyncio.Event()) as rt:
            await adapter.start(rt)
            app = create_app(settings, rt, adapters)
            async with app.router.lifespan_context(app), client_on(app) as client:
                yield TelegramGateway(rt, client, adapter, updates)
            await adapter.close()


# --- the webhook, end to end in the gateway --------------------------------------------------


async def test_a_message_is_published_under_its_chat_scoped_id_once(
    gw: TelegramGateway, tg: FakeTelegram
) -> None:
    assert gw.adapter.bot == BotInfo(tg.bot_id, tg.username)  # from getMe at start
    assert "setWebhook" not in [c.method for c in tg.calls]  # no SB_TELEGRAM_WEBHOOK_URL
    update = gw.updates.message("hello there", message_id=77)
    for _ in range(3):  # Telegram retries an update until it gets its 200
        response = await gw.post(update)
        assert response.status_code == 200, response.text
        assert response.json() == {"ok": True}
    [(msg_id, message)] = await gw.inbound()
    assert msg_id == "telegram:default:4242:77"
    assert (message.channel, message.account, message.message_id) == (
        "telegram",
        "default",
        "4242:77",
    )
    assert (message.sender, message.chat.id, message.chat.type) == ("4242", "4242", "direct")
    assert message.text == "hello there" and not message.edited
    assert message.received_at_ms > 0
    # The same message id in another chat is another message.
    other = gw.updates.message("hi", message_id=77, chat=gw.updates.group(-100555))
    assert (await gw.post(other)).status_code == 200
    assert [i for i, _ in await gw.inbound()][1] == "telegram:default:-100555:77"


async def test_an_edit_is_a_new_message_and_its_retry_is_not(gw: TelegramGateway) -> None:
    original = gw.updates.message_object("draft", message_id=9)
    await gw.post(gw.updates.update("message", original))
    edit = gw.updates.edited(original, "final text", edit_date=1_700_000_123)
    await gw.post(edit)
    await gw.post(edit)
    again = gw.updates.edited(original, "final text!", edit_date=1_700_000_456)
    await gw.post(again)
    got = await gw.inbound()
    assert [i for i, _ in got] == [
        "telegram:default:4242:9",
        "telegram:default:4242:9:edit:1700000123",
        "telegram:default:4242:9:edit:1700000456",
    ]
    assert [(m.text, m.edited) for _, m in got] == [
        ("draft", False),
        ("final text", True),
        ("final text!", True),
    ]


@pytest.mark.parametrize(
    ("secret", "why"),
    [("", "missing"), ("wrong-secret", "bad"), (SECRET + "x", "bad"), (SECRET[:-1], "bad")],
    ids=["missing", "wrong", "one-more-character", "one-less-character"],
)
async def test_a_call_without_the_secret_is_401_and_nothing_is_published(
    gw: TelegramGateway, secret: str, why: str
) -> None:
    response = await gw.post(gw.updates.message("let me in"), secret=secret)
    assert response.status_code == 401, response.text
    assert why in response.text and SECRET not in response.text
    assert await gw.inbound() == []


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"message": {"message_id": 1}}',  # no update_id
        b'{"update_id": "1", "message": {}}',
        b'{"update_id": 1, "message": "text"}',
        b'{"update_id": 1, "message": {"message_id": 1, "text": "no chat"}}',
        b'{"update_id": 1, "message": {"message_id": "1", "chat": {"id": 5, "type": "private"}}}',
        b"\xff\xfe",
    ],
)
async def test_a_malformed_update_is_400_and_nothing_is_published(
    gw: TelegramGateway, body: bytes
) -> None:
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET, "Content-Type": "application/json"}
    response = await gw.client.post(HOOK, content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert await gw.inbound() == []


@pytest.mark.parametrize("account", ["other", "Default", "default2"])
async def test_only_the_default_account_is_served(gw: TelegramGateway, account: str) -> None:
    """The bot is one account, ``default``: a call to any other name is 404 (before: accepted,
    published as that account)."""
    body, headers = gw.updates.webhook(gw.updates.message("hi"))
    response = await gw.client.post(f"/channels/telegram/{account}", content=body, headers=headers)
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "unknown_account"
    assert await gw.inbound() == []


async def test_updates_with_nothing_for_the_agent_are_200_and_publish_nothing(
    gw: TelegramGateway, tg: FakeTelegram
) -> None:
    u = gw.updates
    channel = {"id": -1009, "title": "News", "type": "channel"}
    ignored = [
        {
            "update_id": 1,
            "channel_post": {"message_id": 1, "chat": channel, "date": 1, "text": "x"},
        },
        {"update_id": 2, "callback_query": {"id": "5", "from": u.user(), "data": "x"}},
        {"update_id": 3, "my_chat_member": {"chat": u.group(), "from": u.user(), "date": 1}},
        u.message(None, sticker={"file_id": "CAACAgI", "file_unique_id": "x", "type": "regular"}),
        u.message(None, chat=u.group(), new_chat_members=[u.user(5)]),
        u.message("I am the bot", user=u.bot_user(), chat=u.group()),
        u.message("another bot", user={**u.user(77), "is_bot": True}, chat=u.group()),
        u.message("forwarded", chat=u.group(), is_automatic_forward=True),
        u.message("   "),
    ]
    for update in ignored:
        response = await gw.post(update)
        assert response.status_code == 200, (update, response.text)
    assert await gw.inbound() == []


# --- verify, directly ---------------------------------------------------------------------


def call(headers: dict[str, str], body: bytes = b"{}") -> InboundRequest:
    return InboundRequest("telegram", "default", headers, body, 0)


def test_verify_compares_the_secret_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = TelegramAdapter("1:x", SECRET)
    seen: list[tuple[bytes, bytes]] = []

    def compare(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return a == b

    monkeypatch.setattr(telegram.hmac, "compare_digest", compare)
    adapter.verify(call({"x-telegram-bot-api-secret-token": SECRET}))
    with pytest.raises(Unauthorized):
        adapter.verify(call({"x-telegram-bot-api-secret-token": "nope"}))
    assert seen == [(SECRET.encode(), SECRET.encode()), (b"nope", SECRET.encode())]


def test_without_a_secret_every_webhook_call_is_refused() -> None:
    adapter = TelegramAdapter("1:x", "", mode="polling")
    for headers in (
        {},
        {"x-telegram-bot-api-secret-token": ""},
        {"x-telegram-bot-api-secret-token": "a"},
    ):
        with pytest.raises(Unauthorized):
            adapter.verify(call(headers))


# --- settings -----------------------------------------------------------------------------


def test_from_settings(tmp_path: Path) -> None:
    assert from_settings(settings_for(tmp_path)) is None  # no token: not served
    with pytest.raises(ConfigError, match="SB_TELEGRAM_WEBHOOK_SECRET must be set"):
        from_settings(settings_for(tmp_path, telegram_bot_token="123:abc"))
    for weak in ("changeme", "short-one", "has space in it and is long enough"):
        with pytest.raises(ConfigError, match="SB_TELEGRAM_WEBHOOK_SECRET is refused") as info:
            from_settings(
                settings_for(tmp_path, telegram_bot_token="123:abc", telegram_webhook_secret=weak)
            )
        assert weak not in str(info.value)
    with pytest.raises(ConfigError, match="not a bot token") as bad:
        from_settings(
            settings_for(tmp_path, telegram_bot_token="nocolon", telegram_webhook_secret=SECRET)
        )
    assert "nocolon" not in str(bad.value)
    polling = from_settings(
        settings_for(tmp_path, telegram_bot_token="123:abc", telegram_mode="polling")
    )
    assert isinstance(polling, TelegramAdapter) and polling.mode == "polling"
    adapter = from_settings(
        settings_for(tmp_path, telegram_bot_token="123:abc", telegram_webhook_secret=SECRET)
    )
    assert isinstance(adapter, TelegramAdapter) and adapter.bot == BotInfo(123)
    assert "abc" not in repr(adapter) and SECRET not in repr(adapter)


async def test_a_token_telegram_refuses_stops_the_start(tg: FakeTelegram) -> None:
    adapter = TelegramAdapter("999:not-the-token", SECRET, tg.base_url)
    with pytest.raises(ConfigError, match="refused SB_TELEGRAM_BOT_TOKEN") as info:
        await adapter.start()
    assert "not-the-token" not in str(info.value)
    await adapter.close()


async def test_start_registers_the_webhook_with_its_secret(tg: FakeTelegram) -> None:
    url = "https://bot.example.com/channels/telegram/default"
    adapter = TelegramAdapter(tg.token, SECRET, tg.base_url, webhook_url=url)
    await adapter.start()
    await adapter.close()
    assert tg.webhook == {
        "url": url,
        "secret_token": SECRET,
        "allowed_updates": ["message", "edited_message", "callback_query"],
    }
    tg.fail_next("setWebhook", 400, "Bad Request: bad webhook: An HTTPS URL must be provided")
    adapter = TelegramAdapter(tg.token, SECRET, tg.base_url, webhook_url="http://x")
    with pytest.raises(ConfigError, match="HTTPS URL must be provided"):
        await adapter.start()
    await adapter.close()


async def test_telegram_down_at_start_is_retried_in_the_background(tg: FakeTelegram) -> None:
    tg.fail_next("getMe", 502)
    adapter = TelegramAdapter(tg.token, SECRET, tg.base_url)
    await adapter.start()  # does not raise: the gateway serves anyway
    assert adapter.bot == BotInfo(tg.bot_id)  # from the token until getMe answers
    for _ in range(500):
        if adapter.bot.username:
            break
        await asyncio.sleep(0.02)
    await adapter.close()
    assert adapter.bot == BotInfo(tg.bot_id, tg.username)
    assert [c.status for c in tg.attempts("getMe")] == [502, 200]
