"""What the lane tests wait for and send, against the real services: a chat channel's inbound
message, and "the pipeline is done with everything sent so far", a positive event to wait for
before checking that nothing (more) happened.

Done means: the router's durable consumer on INBOUND has had every message acknowledged (it
acks after appending the lane item), then the agents' shared ``dispatch`` consumer on LANES has
had every lane item acknowledged. An agent acks a lane delivery only after the run that answers
it is committed and its reply parts are on OUTBOUND (a replayed item: after republishing them),
and a delivery it cannot finish comes back (NAK, or the ack wait after a crash) until one does."""

from __future__ import annotations

import asyncio
import time

import nats
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.sessions import inbound_msg_id
from switchboard.v1 import messages_pb2


async def wait_consumed(js: JetStreamContext, stream: str, durable: str, timeout: float) -> None:
    """Until ``durable`` has delivered, and had acknowledged, every message ``stream`` holds now."""
    target = (await js.stream_info(stream)).state.last_seq
    deadline = time.monotonic() + timeout
    while True:
        info = await js.consumer_info(stream, durable)
        acked = info.ack_floor.stream_seq if info.ack_floor else 0
        if info.num_pending == 0 and info.num_ack_pending == 0 and acked >= target:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{durable} on {stream} did not finish up to {target}: {info}")
        await asyncio.sleep(0.1)


async def wait_settled(js: JetStreamContext, timeout: float = 60.0) -> None:
    """Until every inbound message published so far is routed and every lane item answered."""
    await wait_consumed(js, "INBOUND", "router", timeout)
    await wait_consumed(js, "LANES", "dispatch", timeout)


def settle(nats_url: str, timeout: float = 60.0) -> None:
    """:func:`wait_settled` from sync code."""

    async def run() -> None:
        nc = await nats.connect(nats_url)
        try:
            await wait_settled(nc.jetstream(), timeout)
        finally:
            await nc.close()

    asyncio.run(run())


def chat_message(
    session_key: str, message_id: str, text: str, thread_id: str = ""
) -> messages_pb2.InboundMessage:
    """A direct message on the ``webhook`` channel (account ``acct-1``), as a channel adapter
    would publish it."""
    peer = session_key.rsplit(":", 1)[1]
    return messages_pb2.InboundMessage(
        channel="webhook",
        account="acct-1",
        sender=peer,
        chat=messages_pb2.ChatRef(id=peer, type="direct"),
        text=text,
        message_id=message_id,
        thread_id=thread_id,
        received_at_ms=int(time.time() * 1000),
        session_key=session_key,
        agent="main",
    )


async def publish_chat(js: JetStreamContext, message: messages_pb2.InboundMessage) -> None:
    msg_id = inbound_msg_id(message.channel, message.account, message.message_id)
    await bus.js_publish(js, f"sb.inbound.{message.channel}", message, msg_id=msg_id)
