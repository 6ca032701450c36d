"""WhatsApp replies: text split at the Cloud API's 4096 characters keeping every character,
sent by the real adapter to the fake Graph API over HTTP; Graph's refusals mapped to retry-later
(429, rate-limit codes, 5xx) or undeliverable with Meta's own words (131047, the 24-hour window:
dead-lettered at once by the real delivery on a real nats-server, never retried)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from switchboard import bus
from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.base import RetryLater, Undeliverable
from switchboard_gateway.channels.whatsapp import WhatsAppAdapter
from switchboard_gateway.channels.whatsapp_format import TEXT_LIMIT, split_text
from switchboard_gateway.delivery import Delivery
from tests.fakes.whatsapp import WINDOW_DETAILS, WINDOW_MESSAGE, FakeWhatsApp
from tests.support.streams import stored as stream_messages

from .gateway_harness import Gateway, started

USER = "15551234567"


@pytest.fixture
def fake() -> Iterator[FakeWhatsApp]:
    with FakeWhatsApp() as wa:
        yield wa


@pytest.fixture
async def adapter(fake: FakeWhatsApp) -> AsyncIterator[WhatsAppAdapter]:
    adapter = WhatsAppAdapter(
        fake.token, fake.app_secret, fake.verify_token, fake.phone_number_id, fake.base_url
    )
    await adapter.start(None)
    yield adapter
    await adapter.close()


def part(text: str, to: str = USER, **fields: object) -> messages_pb2.OutboundMessage:
    return messages_pb2.OutboundMessage(
        channel="whatsapp",
        account="default",
        chat=messages_pb2.ChatRef(id=to, type="direct"),
        text=text,
        **fields,  # type: ignore[arg-type]
    )


def test_split_keeps_every_character_within_the_limit() -> None:
    text = ("word " * 900 + "\n") * 3 + "x" * 5000
    pieces = split_text(text)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= TEXT_LIMIT for p in pieces)
    assert len(pieces) > 2
    assert pieces[0].endswith((" ", "\n"))  # cut at a space or line, not inside a word
    assert split_text("short") == ["short"]


async def test_a_long_reply_is_sent_as_pieces_in_order(
    adapter: WhatsAppAdapter, fake: FakeWhatsApp
) -> None:
    text = "line of the answer\n" * 600  # 11400 characters
    messages = adapter.format(part(text, reply_to="wamid.IN1"))
    for message in messages:
        await adapter.send("default", message)
    sent = fake.wait_for_messages(len(messages))
    assert len(sent) == 3
    bodies = [s.body["text"]["body"] for s in sent]
    assert "".join(bodies) == text
    assert all(s.body["to"] == USER and s.body["type"] == "text" for s in sent)
    assert sent[0].body["context"] == {"message_id": "wamid.IN1"}


async def test_a_link_rides_in_the_text_with_a_preview(
    adapter: WhatsAppAdapter, fake: FakeWhatsApp
) -> None:
    [message] = adapter.format(part("see", media=["https://example.com/a.png"]))
    await adapter.send("default", message)
    [sent] = fake.wait_for_messages(1)
    assert sent.body["text"] == {"body": "see\nhttps://example.com/a.png", "preview_url": True}


async def test_the_24_hour_window_is_undeliverable_with_metas_words(
    adapter: WhatsAppAdapter, fake: FakeWhatsApp
) -> None:
    fake.outside_window.add(USER)
    [message] = adapter.format(part("hello again"))
    with pytest.raises(Undeliverable) as refused:
        await adapter.send("default", message)
    assert WINDOW_MESSAGE in str(refused.value) and WINDOW_DETAILS in str(refused.value)
    assert "131047" in str(refused.value)


async def test_rate_limits_and_server_errors_are_retried_later(
    adapter: WhatsAppAdapter, fake: FakeWhatsApp
) -> None:
    [message] = adapter.format(part("hi"))
    fake.fail_next(429, 130429, "Rate limit hit", retry_after=7)
    with pytest.raises(RetryLater) as later:
        await adapter.send("default", message)
    assert later.value.retry_after_s == 7
    fake.fail_next(400, 131056, "Pair rate limit hit")
    with pytest.raises(RetryLater):
        await adapter.send("default", message)
    fake.fail_next(503, 1, "Service temporarily unavailable")
    with pytest.raises(RetryLater):
        await adapter.send("default", message)
    fake.fail_next(400, 100, "Invalid parameter")
    with pytest.raises(Undeliverable, match="Invalid parameter"):
        await adapter.send("default", message)
    await adapter.send("default", message)
    assert [s.body["text"]["body"] for s in fake.wait_for_messages(1)] == ["hi"]


async def test_a_wrong_token_is_undeliverable_and_not_logged(
    fake: FakeWhatsApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "EAAGwrong-token-value"
    adapter = WhatsAppAdapter(secret, "s", "v", fake.phone_number_id, fake.base_url)
    [message] = adapter.format(part("hi"))
    with pytest.raises(Undeliverable, match="190") as refused:
        await adapter.send("default", message)
    await adapter.close()
    assert secret not in str(refused.value) and secret not in caplog.text
    assert secret not in repr(adapter)


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(nats_url, tmp_path) as gateway:
        yield gateway


async def test_the_24_hour_error_is_dead_lettered_at_once_with_the_platform_text(
    gw: Gateway, fake: FakeWhatsApp, adapter: WhatsAppAdapter
) -> None:
    fake.outside_window.add(USER)
    delivery = Delivery({"whatsapp": adapter}, concurrency=2, max_attempts=5)
    await delivery.start(gw.rt)
    reply = part("too late", run_id="run-late", part=0, parts=1, session_key="main:wa:u")
    subject = gw.rt.subjects.outbound("whatsapp", "default")
    await bus.js_publish(gw.rt.js, subject, reply, msg_id="run-late:0")
    stream = gw.rt.subjects.stream("DEADLETTER")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    letters: list[messages_pb2.DeadLetter] = []
    while not letters and loop.time() < deadline:
        await asyncio.sleep(0.05)
        letters = [
            s.message for s in await stream_messages(gw.rt.js, stream, messages_pb2.DeadLetter)
        ]
    [letter] = letters
    assert (letter.part.text, letter.attempts) == ("too late", 1)
    assert WINDOW_MESSAGE in letter.reason and WINDOW_DETAILS in letter.reason
    await asyncio.sleep(0.3)  # room for a redelivery, were the part still there
    assert [c.get("to") for c in fake.calls] == [USER]
