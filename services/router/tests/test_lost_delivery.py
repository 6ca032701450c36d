"""A delivery lost in flight (handed out by the INBOUND consumer, never received: a NATS node
died under it) comes back only after the consumer's ack wait. The session's later messages must
wait for it instead of being appended first: the fault campaign saw a Slack message answered
25 s late, after three later ones of its conversation.

Here another pull on the router's consumer takes a message and sits on it, as a dead route
would; the router is the one replica, with one slot, and a debounce window keeps that slot busy
while the test's pull takes the message."""

from __future__ import annotations

import asyncio

from nats.js import JetStreamContext
from prometheus_client import REGISTRY

from switchboard import bus
from switchboard.sessions import inbound_msg_id
from switchboard.v1 import messages_pb2
from tests.support.streams import stored as stream_messages

from .router_harness import dm, eventually, router


def held() -> float:
    labels = {"channel": "telegram", "outcome": "held"}
    return REGISTRY.get_sample_value("sb_router_messages_total", labels) or 0.0


SUBJECTS = bus.Subjects()
ENV = {"SB_DM_POLICY": "open", "SB_DEBOUNCE_MS": "1500", "SB_CONCURRENCY": "1"}


async def lane_ids(js: JetStreamContext) -> list[str]:
    found = await stream_messages(js, SUBJECTS.stream("LANES"), messages_pb2.LaneItem)
    return [s.message.message.message_id for s in found]


async def publish(js: JetStreamContext, message: messages_pb2.InboundMessage) -> int:
    msg_id = inbound_msg_id(message.channel, message.account, message.message_id)
    return await bus.js_publish(js, SUBJECTS.inbound(message.channel), message, msg_id=msg_id)


async def test_a_later_message_waits_for_an_older_one_lost_in_flight(nats_url: str) -> None:
    held_before = held()
    async with router(nats_url, **ENV) as r:
        js = r.js
        await publish(js, dm("telegram", "7", "x1"))  # another session; its debounce: 1.5 s
        thief = await js.pull_subscribe(
            SUBJECTS.inbound("telegram"), durable="router", stream=SUBJECTS.stream("INBOUND")
        )
        await asyncio.sleep(0.3)  # the router holds x1 in its only slot
        lost_seq = await publish(js, dm("telegram", "5", "a1"))
        [lost] = await thief.fetch(1, timeout=5)
        assert lost.metadata.sequence.stream == lost_seq  # handed out, never to reach the router

        async def routed(ids: set[str]) -> bool:
            return ids <= set(await lane_ids(js))

        await eventually(lambda: routed({"x1"}))
        await publish(js, dm("telegram", "5", "a2"))  # the same session, after a1
        await asyncio.sleep(3.0)  # a2's debounce is over: before, a2 was appended here
        assert "a2" not in await lane_ids(js)
        await lost.nak()  # the redelivery (after the ack wait, in life) reaches the router
        await eventually(lambda: routed({"a1", "a2"}))
        ids = await lane_ids(js)
    assert ids.index("a1") < ids.index("a2")
    assert held() == held_before + 1  # a2 waited once, not failed and retried
