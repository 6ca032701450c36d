"""Telegram outbound against the fake Bot API over real HTTP: what arrives in the chat, and
how each Bot API error maps to delivery's RetryLater (429 with its retry_after, 5xx and a
platform out of reach with backoff) or Undeliverable (400, 403, a refused token); HTML
Telegram cannot parse is sent again as plain text once; the bot token never shows in a log
or an error."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.base import PlatformMessage, RetryLater, Undeliverable
from switchboard_gateway.channels.telegram import TelegramAdapter
from tests.fakes.telegram import FakeTelegram

SECRET = "tg-send-secret-0123456789abcdef"
CHAT = 4242


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


def part(text: str, chat: int = CHAT, **fields: object) -> messages_pb2.OutboundMessage:
    chat_ref = messages_pb2.ChatRef(id=str(chat), type="direct" if chat > 0 else "group")
    return messages_pb2.OutboundMessage(chat=chat_ref, text=text, **fields)  # type: ignore[arg-type]


async def deliver(adapter: TelegramAdapter, outbound: messages_pb2.OutboundMessage) -> None:
    for message in adapter.format(outbound):
        await adapter.send("default", message)


async def test_a_reply_arrives_formatted_in_its_chat_topic_and_reply(
    adapter: TelegramAdapter, tg: FakeTelegram
) -> None:
    text = "**Done**: `a < b` & [docs](https://example.com/?q=1&r=2)"
    await deliver(adapter, part(text, chat=-100777, reply_to="-100777:31", thread_id="5"))
    [sent] = tg.sent
    assert (sent.chat_id, sent.parse_mode, sent.reply_to, sent.thread_id) == (
        -100777,
        "HTML",
        31,
        5,
    )
    assert sent.text == "Done: a < b & docs"  # as the chat shows it
    assert '<a href="https://example.com/?q=1&amp;r=2">docs</a>' in sent.raw
    long = "word " * 2000  # 10000 characters: three messages
    await deliver(adapter, part(long))
    assert [len(s.text) for s in tg.sent_to(CHAT)] == [4095, 4095, 1810]
    assert "".join(s.text for s in tg.sent_to(CHAT)) == long


async def test_a_429_asks_to_retry_after_telegrams_retry_after(
    adapter: TelegramAdapter, tg: FakeTelegram
) -> None:
    [message] = adapter.format(part("hi"))
    tg.fail_next("sendMessage", 429, retry_after=7)
    with pytest.raises(RetryLater) as info:
        await adapter.send("default", message)
    assert info.value.retry_after_s == 7.0
    await adapter.send("default", message)
    assert [c.status for c in tg.attempts()] == [429, 200] and len(tg.sent) == 1


async def test_5xx_and_an_unreachable_api_back_off(
    adapter: TelegramAdapter, tg: FakeTelegram
) -> None:
    [message] = adapter.format(part("hi"))
    tg.fail_always("sendMessage", 500)
    delays = []
    for _ in range(3):
        with pytest.raises(RetryLater) as info:
            await adapter.send("default", message)
        delays.append(info.value.retry_after_s)
    assert delays == [1.0, 2.0, 4.0]
    tg.recover("sendMessage")
    await adapter.send("default", message)  # a success resets the backoff
    tg.fail_next("sendMessage", 502)
    with pytest.raises(RetryLater) as again:
        await adapter.send("default", message)
    assert again.value.retry_after_s == 1.0

    with socket.socket() as sock:  # a port that refuses connections
        sock.bind(("127.0.0.1", 0))
        down = TelegramAdapter(tg.token, SECRET, f"http://127.0.0.1:{sock.getsockname()[1]}")
        await down.start()  # getMe fails: retried in the background, no error
        with pytest.raises(RetryLater, match="unreachable"):
            await down.send("default", message)
        await down.close()


@pytest.mark.parametrize(
    ("code", "description", "why"),
    [
        (400, "Bad Request: chat not found", "chat not found"),
        (403, "Forbidden: bot was blocked by the user", "blocked"),
        (400, "Bad Request: message thread not found", "thread not found"),
    ],
)
async def test_a_refused_message_is_undeliverable(
    adapter: TelegramAdapter, tg: FakeTelegram, code: int, description: str, why: str
) -> None:
    tg.fail_next("sendMessage", code, description)
    with pytest.raises(Undeliverable, match=why):
        await deliver(adapter, part("hi"))
    assert tg.sent == []


async def test_blocked_and_missing_chats_of_the_fake(
    adapter: TelegramAdapter, tg: FakeTelegram
) -> None:
    tg.blocked.add(1)
    tg.missing_chats.add(2)
    with pytest.raises(Undeliverable, match="403 Forbidden: bot was blocked"):
        await deliver(adapter, part("hi", chat=1))
    with pytest.raises(Undeliverable, match="400 Bad Request: chat not found"):
        await deliver(adapter, part("hi", chat=2))
    with pytest.raises(Undeliverable, match="only 'default'"):
        await adapter.send("other", adapter.format(part("hi"))[0])


async def test_a_refused_token_is_undeliverable(tg: FakeTelegram) -> None:
    adapter = TelegramAdapter("1:wrong", SECRET, tg.base_url)
    adapter.api.open()  # not start(): it would stop on the refused token
    with pytest.raises(Undeliverable, match="refused the bot token"):
        await deliver(adapter, part("hi"))
    await adapter.close()


async def test_html_telegram_cannot_parse_is_sent_again_as_plain_text_once(
    adapter: TelegramAdapter, tg: FakeTelegram
) -> None:
    bad = 'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 3'
    tg.fail_next("sendMessage", 400, bad)
    await deliver(adapter, part("**bold** and [a link](https://example.com)"))
    [sent] = tg.sent
    assert (sent.parse_mode, sent.text) == (None, "bold and a link (https://example.com)")
    tg.fail_next("sendMessage", 400, bad)
    tg.fail_next("sendMessage", 400, bad)
    with pytest.raises(Undeliverable, match="can't parse entities"):
        await deliver(adapter, part("**again**"))
    assert len(tg.attempts()) == 4 and len(tg.sent) == 1


async def test_a_group_that_became_a_supergroup_gets_the_reply_there(
    adapter: TelegramAdapter, tg: FakeTelegram
) -> None:
    tg.fail_next(
        "sendMessage",
        400,
        "Bad Request: group chat was upgraded to a supergroup chat",
        migrate_to_chat_id=-1009999,
    )
    await deliver(adapter, part("hi", chat=-55))
    assert [(s.chat_id, s.text) for s in tg.sent] == [(-1009999, "hi")]


async def test_media_references_are_sent_by_file_id(
    adapter: TelegramAdapter, tg: FakeTelegram
) -> None:
    await deliver(adapter, part("look", media=["telegram:photo:AgAD-9?mime=image%2Fjpeg"]))
    assert [(s.method, s.text, s.file_id) for s in tg.sent] == [
        ("sendMessage", "look", None),
        ("sendPhoto", "", "AgAD-9"),
    ]


async def test_typing_is_best_effort(adapter: TelegramAdapter, tg: FakeTelegram) -> None:
    chat = messages_pb2.ChatRef(id="-100777", type="group")
    await adapter.typing("default", chat, "5")
    tg.fail_next("sendChatAction", 500)
    await adapter.typing("default", chat, "")  # fails quietly
    await adapter.typing("default", messages_pb2.ChatRef(id="nope"), "")  # not even called
    assert tg.actions == [(-100777, "typing", 5)]
    assert [c.status for c in tg.attempts("sendChatAction")] == [200, 500]


async def test_the_token_never_shows_in_logs_or_errors(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    secret_part = tg.token.partition(":")[2]
    caplog.set_level(logging.DEBUG)
    # The services keep httpx and httpcore at WARNING; here they log everything.
    caplog.set_level(logging.DEBUG, logger="httpx")
    caplog.set_level(logging.DEBUG, logger="httpcore")
    adapter = TelegramAdapter(tg.token, SECRET, tg.base_url, webhook_url="https://x.example/h")
    await adapter.start()
    errors: list[BaseException] = []
    message = PlatformMessage(
        {"method": "sendMessage", "params": {"chat_id": CHAT, "text": "hi"}, "plain": "hi"}
    )
    for code in (429, 500, 403):
        tg.fail_next("sendMessage", code)
        try:
            await adapter.send("default", message)
        except (RetryLater, Undeliverable) as exc:
            errors.append(exc)
    await adapter.send("default", message)
    await adapter.typing("default", messages_pb2.ChatRef(id=str(CHAT)), "")
    await adapter.close()
    assert len(errors) == 3
    assert "/botTOKEN/sendMessage" in caplog.text  # httpx logged each request, token-less
    assert secret_part not in caplog.text
    assert all(secret_part not in f"{e!s} {e!r}" for e in errors)
    assert secret_part not in repr(adapter) and secret_part not in repr(adapter.api)
