"""Delivery of reply parts from the real OUTBOUND stream (a work queue) through the fake
platform's adapter: sent once and acknowledged, retried when the platform asks to wait,
dead-lettered (terminated, counted, logged) when it refuses for good or keeps failing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from switchboard import bus
from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.base import RetryLater, Undeliverable
from switchboard_gateway.delivery import Delivery
from tests.support.streams import stored as stream_messages

from .gateway_harness import Gateway, started

DELIVERY_LOG = "switchboard_gateway.delivery"
CONSUMER = "deliver-fakechat"


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(nats_url, tmp_path) as gateway:
        yield gateway


class Outcomes:
    """``sb_outbound_messages_total`` of one channel by outcome, counted from when this was
    made (the registry is the process's)."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.start = {o: self._total(o) for o in ("sent", "retry", "dead_letter")}

    def _total(self, outcome: str) -> float:
        labels = {"channel": self.channel, "outcome": outcome}
        return REGISTRY.get_sample_value("sb_outbound_messages_total", labels) or 0.0

    def __call__(self, outcome: str) -> float:
        return self._total(outcome) - self.start[outcome]

    def now(self) -> tuple[float, float, float]:
        return (self("sent"), self("retry"), self("dead_letter"))

    async def expect(self, sent: int, retry: int, dead_letter: int) -> None:
        """The counts reach these (delivery counts a sent part just after acking it), and
        stay there."""
        expected = (sent, retry, dead_letter)

        async def reached() -> bool:
            return self.now() == expected

        with contextlib.suppress(AssertionError):
            await eventually(reached, "counted", timeout=5)
        assert self.now() == expected


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15) -> None:
    """Poll ``check`` until it holds: a bound on waiting, not a timing assertion."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


async def dead_letters(gw: Gateway) -> list[tuple[str, messages_pb2.DeadLetter]]:
    """What the DEADLETTER stream holds: (subject, letter)."""
    name = gw.rt.subjects.stream("DEADLETTER")
    found = await stream_messages(gw.rt.js, name, messages_pb2.DeadLetter)
    return [(s.subject, s.message) for s in found]


async def in_stream(gw: Gateway) -> int:
    """How many parts OUTBOUND still holds."""
    info = await gw.rt.js.stream_info(gw.rt.subjects.stream("OUTBOUND"))
    return int(info.state.messages or 0)


async def in_stream_is(gw: Gateway, size: int) -> bool:
    return await in_stream(gw) == size


async def settled(gw: Gateway) -> bool:
    """Nothing of the delivery consumer's is pending or waiting for an ack, up to the last part
    published (right after a publish the server may not count it as pending yet)."""
    stream = gw.rt.subjects.stream("OUTBOUND")
    last = (await gw.rt.js.stream_info(stream)).state.last_seq or 0
    info = await gw.rt.js.consumer_info(stream, CONSUMER)
    floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
    return (floor or 0) >= last and info.num_pending == 0 and info.num_ack_pending == 0


async def publish(gw: Gateway, text: str, account: str = "acct1", channel: str = "") -> None:
    """A reply part as the agent publishes it."""
    channel = channel or gw.fake.name
    part = messages_pb2.OutboundMessage(
        run_id=f"run-{text}",
        part=0,
        parts=1,
        session_key=f"main:{channel}:u1",
        channel=channel,
        account=account,
        chat=messages_pb2.ChatRef(id="u1", type="direct"),
        reply_to="m-1",
        text=text,
        message_ids=["m-1"],
    )
    subject = gw.rt.subjects.outbound(channel, account)
    await bus.js_publish(gw.rt.js, subject, part, msg_id=f"run-{text}:0")


async def deliver(gw: Gateway, max_attempts: int = 8) -> None:
    """Start delivery on the gateway's runtime, as ``serve()`` does."""
    delivery = Delivery({gw.fake.name: gw.fake}, concurrency=4, max_attempts=max_attempts)
    await delivery.start(gw.rt)


def attempted(gw: Gateway) -> list[str]:
    return [str(m.payload["text"]) for _, m in gw.fake.attempts]


async def test_each_part_is_formatted_sent_once_and_acked(gw: Gateway) -> None:
    outcomes = Outcomes(gw.fake.name)
    await publish(gw, "for another channel", channel="otherchat")
    await deliver(gw)
    await publish(gw, "one")
    await publish(gw, "two")
    await publish(gw, "three", account="acct2")
    await eventually(lambda: settled(gw), "every part acked")
    assert sorted((account, m.payload["text"]) for account, m in gw.fake.sent) == [
        ("acct1", "one"),
        ("acct1", "two"),
        ("acct2", "three"),
    ]
    assert {(m.payload["chat_id"], m.payload["reply_to"]) for _, m in gw.fake.sent} == {
        ("u1", "m-1")
    }
    assert len(gw.fake.attempts) == 3
    assert await in_stream(gw) == 1  # acked parts left the work queue; otherchat's stays
    info = await gw.rt.js.consumer_info(gw.rt.subjects.stream("OUTBOUND"), CONSUMER)
    assert info.num_redelivered == 0
    await outcomes.expect(sent=3, retry=0, dead_letter=0)


async def test_a_part_the_platform_asks_to_retry_is_sent_once_later(gw: Gateway) -> None:
    outcomes = Outcomes(gw.fake.name)
    gw.fake.script["busy"] = [RetryLater("429 too many requests", retry_after_s=0.2)]
    await deliver(gw)
    await publish(gw, "busy")
    await eventually(lambda: settled(gw), "the part acked")
    assert gw.fake.texts_sent() == ["busy"]
    assert attempted(gw) == ["busy", "busy"]
    assert await in_stream(gw) == 0
    await outcomes.expect(sent=1, retry=1, dead_letter=0)


async def test_a_part_that_keeps_failing_is_dead_lettered_after_max_attempts(
    gw: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, DELIVERY_LOG)
    outcomes = Outcomes(gw.fake.name)
    gw.fake.forever["doomed"] = RetryLater("503 from the platform", retry_after_s=0.05)
    await deliver(gw, max_attempts=3)
    await publish(gw, "doomed")
    await publish(gw, "fine")
    # terminated: a part that merely ran out of deliveries would stay in the work queue
    await eventually(lambda: in_stream_is(gw, 0), "the part terminated")
    await eventually(lambda: settled(gw), "nothing pending")
    await outcomes.expect(sent=1, retry=2, dead_letter=1)
    assert gw.fake.texts_sent() == ["fine"]
    await asyncio.sleep(0.5)  # ten retry delays: a redelivery would have come by now
    assert attempted(gw).count("doomed") == 3
    [record] = [r for r in caplog.records if r.name == DELIVERY_LOG]
    assert record.getMessage() == "reply part not delivered: still failing: 503 from the platform"
    assert (record.__dict__["channel"], record.__dict__["run_id"]) == ("fakechat", "run-doomed")
    [(subject, letter)] = await dead_letters(gw)
    assert subject == "sb.deadletter.outbound.fakechat"
    assert (letter.part.run_id, letter.part.text) == ("run-doomed", "doomed")
    assert (letter.reason, letter.attempts) == ("still failing: 503 from the platform", 3)


async def test_an_undeliverable_part_is_dead_lettered_at_once(
    gw: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, DELIVERY_LOG)
    outcomes = Outcomes(gw.fake.name)
    gw.fake.forever["gone"] = Undeliverable("chat not found")
    await deliver(gw, max_attempts=5)
    await publish(gw, "gone")
    await eventually(lambda: in_stream_is(gw, 0), "the part terminated")
    await eventually(lambda: settled(gw), "nothing pending")
    await asyncio.sleep(0.3)  # room for a redelivery, were the part still there
    assert attempted(gw) == ["gone"]
    await outcomes.expect(sent=0, retry=0, dead_letter=1)
    assert [r.getMessage() for r in caplog.records if r.name == DELIVERY_LOG] == [
        "reply part not delivered: chat not found"
    ]
    [(_, letter)] = await dead_letters(gw)
    assert (letter.part.text, letter.reason, letter.attempts) == ("gone", "chat not found", 1)


async def test_a_part_whose_send_raises_something_else_is_still_dead_lettered(
    gw: Gateway,
) -> None:
    """A failure the adapter did not translate (connection refused, a TLS error) is retried
    like any other, and after max_attempts the part is dead-lettered (terminated, counted),
    not left in the work queue, delivered no more and counted nowhere."""
    outcomes = Outcomes(gw.fake.name)
    gw.fake.forever["flaky"] = ConnectionRefusedError("platform API unreachable")
    await deliver(gw, max_attempts=2)
    await publish(gw, "flaky")
    await eventually(lambda: in_stream_is(gw, 0), "the part left OUTBOUND", timeout=8)
    assert (outcomes("sent"), outcomes("dead_letter")) == (0, 1)
    assert attempted(gw) == ["flaky", "flaky"]


async def test_a_retried_part_does_not_resend_what_the_platform_already_has(
    gw: Gateway,
) -> None:
    """A part the platform takes in several messages (its length limit): when the second
    message must be retried, the first is not posted to the chat again."""
    gw.fake.limit = 5
    gw.fake.script[" worl"] = [RetryLater("429", retry_after_s=0.05)]
    await deliver(gw)
    await publish(gw, "hello world")
    await eventually(lambda: settled(gw), "the part acked")
    assert gw.fake.texts_sent() == ["hello", " worl", "d"]


async def publish_parts(gw: Gateway, run_id: str, texts: list[str]) -> None:
    """A reply of several parts, published in order as the agent does."""
    for i, text in enumerate(texts):
        part = messages_pb2.OutboundMessage(
            run_id=run_id,
            part=i,
            parts=len(texts),
            channel=gw.fake.name,
            account="acct1",
            chat=messages_pb2.ChatRef(id="u1", type="direct"),
            text=text,
        )
        subject = gw.rt.subjects.outbound(gw.fake.name, "acct1")
        await bus.js_publish(gw.rt.js, subject, part, msg_id=f"{run_id}:{i}")


async def test_the_parts_of_a_reply_reach_the_chat_in_order(gw: Gateway) -> None:
    """Parts are handled concurrently; the first one must wait for the platform, and the
    later ones wait for it instead of overtaking it."""
    gw.fake.script["first"] = [RetryLater("429", retry_after_s=0.5)]
    await deliver(gw)
    await publish_parts(gw, "run-ordered", ["first", "second", "third", "fourth"])
    await eventually(lambda: settled(gw), "every part acked")
    assert gw.fake.texts_sent() == ["first", "second", "third", "fourth"]


async def test_a_dead_lettered_part_does_not_hold_back_the_next(gw: Gateway) -> None:
    gw.fake.script["lost"] = [Undeliverable("chat gone")]
    await deliver(gw)
    await publish_parts(gw, "run-lost", ["lost", "after"])
    await eventually(lambda: settled(gw), "both parts settled")
    assert gw.fake.texts_sent() == ["after"]
