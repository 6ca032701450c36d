"""The gateway's durable publish on a real nats-server: a stream that is not there yet (a
stream electing a leader answers so) is waited for within SB_PUBLISH_RETRY_S, a retransmit of
the same message is told apart, and a closed connection is final at once."""

from __future__ import annotations

import asyncio

import nats
import pytest

from switchboard import bus
from switchboard.v1 import messages_pb2
from switchboard_gateway.conversations import BusUnavailable, Conversations


def message(message_id: str) -> messages_pb2.InboundMessage:
    return messages_pb2.InboundMessage(
        channel="api", account="a", message_id=message_id, chat={"id": "c"}, text="hi"
    )


async def test_a_publish_waits_for_the_stream_and_a_retransmit_is_a_duplicate(
    nats_url: str,
) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        subjects = bus.Subjects()
        conversations = Conversations(nc, js, subjects, publish_retry_s=60.0)
        publishing = asyncio.create_task(conversations.publish(message("m-1")))
        await asyncio.sleep(0.5)  # no INBOUND stream yet: the publish is being retried
        assert not publishing.done()
        await bus.ensure_streams(js, subjects)
        assert await asyncio.wait_for(publishing, 60) is True  # stored, by this call
        assert await conversations.publish(message("m-1")) is False  # the same id again
        info = await js.stream_info(subjects.stream("INBOUND"))
        assert info.state.messages == 1
    finally:
        await nc.close()


async def test_without_a_stream_the_publish_gives_up_after_its_window(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        conversations = Conversations(nc, nc.jetstream(), bus.Subjects(), publish_retry_s=0.5)
        with pytest.raises(BusUnavailable):
            await asyncio.wait_for(conversations.publish(message("m-2")), 60)
    finally:
        await nc.close()


async def test_a_closed_connection_is_not_retried(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    await bus.ensure_streams(nc.jetstream(), bus.Subjects())
    conversations = Conversations(nc, nc.jetstream(), bus.Subjects(), publish_retry_s=3600.0)
    await nc.close()
    # Retried, it would wait an hour: the bound below would end the test with a timeout.
    with pytest.raises(BusUnavailable):
        await asyncio.wait_for(conversations.publish(message("m-3")), 60)
