"""Telegram's approval buttons against the fake Bot API over real HTTP: a notice goes out with
its inline keyboard (short opaque callback data), a click's ``callback_query`` (webhook or
polling: the same parser) becomes the command it stands for from the clicker, and the answer
to a click is the callback's answer and, when it decided, the notice edited with the verdict
(its entities kept) and no keyboard; a callback Telegram no longer takes does not stop the
edit; callbacks that are not ours publish nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from switchboard import registry
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.telegram import TelegramAdapter
from switchboard_gateway.channels.telegram_buttons import keyboard
from switchboard_gateway.channels.telegram_inbound import BotInfo, parse_update
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.fakes.telegram_updates import FakeTelegramUpdates
from tests.support.streams import ensure_streams_short_leases

from .telegram_poll_harness import gateway_settings, wait_inbound

SECRET = "tg-buttons-secret-0123456789abcdef"
GROUP = -100777
APPROVAL = "ap_3f9a2c1b0011223344ff"
BOT = BotInfo(7000000001, "switchboard_test_bot")


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def adapter(tg: FakeTelegram) -> AsyncIterator[TelegramAdapter]:
    adapter = TelegramAdapter(tg.token, SECRET, tg.base_url)
    await adapter.start()
    yield adapter
    await adapter.close()


def notice(
    text: str = "Approval needed: `get_time`", **fields: Any
) -> messages_pb2.OutboundMessage:
    return messages_pb2.OutboundMessage(
        chat=messages_pb2.ChatRef(id=str(GROUP), type="group"),
        text=text,
        run_id=f"approval:{APPROVAL}",
        **fields,
    )


async def deliver(adapter: TelegramAdapter, part: messages_pb2.OutboundMessage) -> None:
    for message in adapter.format(part):
        await adapter.send("default", message)


def test_only_a_notice_of_a_real_approval_id_gets_buttons() -> None:
    adapter = TelegramAdapter("7000000001:x", SECRET, "http://127.0.0.1:9")
    [message] = adapter.format(notice(approval_id=APPROVAL))
    markup = message.payload["params"]["reply_markup"]
    assert markup == keyboard(APPROVAL)
    [[approve, deny]] = markup["inline_keyboard"]
    assert (approve["text"], approve["callback_data"]) == ("Approve", "ap:3f9a2c1b0011223344ff:y")
    assert (deny["text"], deny["callback_data"]) == ("Deny", "ap:3f9a2c1b0011223344ff:n")
    assert len(approve["callback_data"].encode()) <= 64
    for other in (notice(), notice(approval_id="ap_NOT-HEX"), notice(approval_id="rm -rf")):
        [plain] = adapter.format(other)
        assert "reply_markup" not in plain.payload["params"]
    # A long notice: the buttons go under its last message.
    long = adapter.format(notice("word " * 1500, approval_id=APPROVAL))
    assert len(long) == 2
    assert "reply_markup" not in long[0].payload["params"]
    assert long[1].payload["params"]["reply_markup"] == keyboard(APPROVAL)


def test_a_click_is_the_command_it_stands_for_from_the_clicker() -> None:
    u = TelegramUpdates(SECRET, bot_username=BOT.username, bot_id=BOT.id)
    message = {
        "message_id": 1001,
        "from": u.bot_user(),
        "chat": u.group(GROUP, forum=True),
        "date": 1,
        "text": "Approval needed: get_time",
        "entities": [{"type": "code", "offset": 26, "length": 8}],
        "message_thread_id": 9,
        "is_topic_message": True,
    }
    grace = u.user(4242, first_name="Grace", username="grace")
    grace["last_name"] = "Hopper"
    query = {"id": "88001", "from": grace, "message": message, "data": "ap:3f9a2c1b00:n"}
    [click] = parse_update(u.update("callback_query", query), BOT)
    assert (click.sender, click.chat.id, click.chat.type) == ("4242", str(GROUP), "group")
    assert (click.text, click.thread_id, click.mentions_bot) == ("/deny 3f9a2c1b00", "9", True)
    assert click.message_id == f"{GROUP}:1001:click:88001"
    assert (click.click.message_id, click.click.by, click.click.decision) == (
        "1001",
        "Grace Hopper",
        "",
    )
    assert click.reply_context["callback_query_id"] == "88001"
    assert click.reply_context["message_text"] == "Approval needed: get_time"
    assert json.loads(click.reply_context["message_entities"]) == message["entities"]
    # Not ours, by a bot, on a message the bot cannot see, or without its message: nothing.
    others = [
        {**query, "data": "x"},
        {**query, "data": "ap:3f9a2c1b00:maybe"},
        {**query, "from": {**grace, "is_bot": True}},
        {**query, "message": {**message, "date": 0}},
        {k: v for k, v in query.items() if k != "message"},
        {**query, "id": ""},
    ]
    for other in others:
        assert parse_update(u.update("callback_query", other), BOT) == []


def answer(decision: str, text: str, context: dict[str, str]) -> messages_pb2.OutboundMessage:
    return messages_pb2.OutboundMessage(
        chat=messages_pb2.ChatRef(id=str(GROUP), type="group"),
        text=text,
        reply_context=context,
        click=messages_pb2.ButtonClick(message_id="0", by="Grace Hopper", decision=decision),
    )


async def test_a_decided_click_is_answered_and_the_notice_edited(
    adapter: TelegramAdapter, tg: FakeTelegram
) -> None:
    u = TelegramUpdates(SECRET, bot_username=tg.username, bot_id=tg.bot_id)
    await deliver(adapter, notice("Approval needed: `get_time`", approval_id=APPROVAL))
    [sent] = tg.sent
    query = tg.buttons.click(sent, u.user(4242, first_name="Grace"), "ap:3f9a2c1b00:y")
    entities = [{"type": "code", "offset": 17, "length": 8}]
    context = {
        "callback_query_id": query["id"],
        "message_text": sent.text,
        "message_entities": json.dumps(entities),
    }
    part = answer("approved", "Approved: the call to get_time (3f9a2c1b).", context)
    part.click.message_id = str(sent.message_id)
    await deliver(adapter, part)
    [reply] = tg.buttons.answers
    assert (reply.query_id, reply.text) == (query["id"], part.text)
    [edit] = tg.buttons.edits
    verdict = "Approved by Grace Hopper"
    assert (edit.chat_id, edit.message_id) == (GROUP, sent.message_id)
    assert edit.text == f"{sent.text}\n\n{verdict}"
    offset = len(sent.text) + 2
    assert edit.entities == [*entities, {"type": "bold", "offset": offset, "length": len(verdict)}]
    assert tg.buttons.keyboard(sent) is None


async def test_an_undecided_click_is_only_answered_and_an_old_query_does_not_stop_the_edit(
    adapter: TelegramAdapter, tg: FakeTelegram
) -> None:
    u = TelegramUpdates(SECRET, bot_username=tg.username, bot_id=tg.bot_id)
    await deliver(adapter, notice(approval_id=APPROVAL))
    [sent] = tg.sent
    query = tg.buttons.click(sent, u.user(5151), "ap:3f9a2c1b00:y")
    refused = answer(
        "", "You may not decide this approval. " * 10, {"callback_query_id": query["id"]}
    )
    refused.click.message_id = str(sent.message_id)
    await deliver(adapter, refused)
    [reply] = tg.buttons.answers
    assert len(reply.text) == 200 and reply.text.startswith("You may not decide")
    assert tg.buttons.edits == [] and tg.buttons.keyboard(sent) == keyboard(APPROVAL)
    # The same query again (Telegram refuses it: answered already): the edit still goes.
    late = answer("denied", "Denied.", {"callback_query_id": query["id"]})
    late.click.message_id = str(sent.message_id)
    await deliver(adapter, late)
    assert len(tg.buttons.answers) == 1
    [edit] = tg.buttons.edits
    assert edit.text == "Denied by Grace Hopper"  # no text of the notice was carried


async def test_polling_asks_for_clicks_and_publishes_them(nats_url: str, tmp_path: Path) -> None:
    """The fake's getUpdates hands out only the kinds asked for: a click reaches INBOUND only
    if polling asks for ``callback_query``."""
    admin = await nats.connect(nats_url)
    await ensure_streams_short_leases(admin.jetstream())
    with FakeTelegramUpdates() as fake:
        settings = gateway_settings(
            nats_url,
            home=tmp_path,
            log_json=False,
            telegram_bot_token=fake.token,
            telegram_api_base=fake.base_url,
            telegram_mode="polling",
        )
        adapter = TelegramAdapter(fake.token, "", fake.base_url, mode="polling", settings=settings)
        u = TelegramUpdates("", bot_username="bot", bot_id=fake.bot_id)
        chat = u.private(u.user(4242))
        message = u.message_object("Approval needed", user=u.bot_user(), chat=chat, message_id=77)
        query = {"id": "q-1", "from": u.user(4242), "message": message, "data": "ap:abcdef12:y"}
        async with ServiceRuntime(registry.get("gateway"), settings, asyncio.Event()) as rt:
            await adapter.start(rt)
            try:
                fake.push({"callback_query": query})
                [(msg_id, click)] = await wait_inbound(admin, 1)
            finally:
                await adapter.close()
    await admin.close()
    assert msg_id == "telegram:default:4242:77:click:q-1"
    assert (click.text, click.sender, click.click.message_id) == ("/approve abcdef12", "4242", "77")
