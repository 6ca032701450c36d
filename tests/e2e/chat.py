"""A Telegram chat as the tests see it: messages published to INBOUND the way the gateway
publishes them, and the OUTBOUND parts that answer them."""

from __future__ import annotations

import asyncio
import time

import nats

from switchboard import bus
from switchboard.v1 import messages_pb2
from tests.e2e.helpers import wait_for
from tests.support.streams import outbound_parts

SUBJECTS = bus.Subjects()


def say(url: str, sender: str, text: str, message_id: str, group: str = "") -> None:
    """A Telegram message from ``sender``: a DM, or in the group chat ``group``."""
    chat = messages_pb2.ChatRef(id=group or sender, type="group" if group else "direct")
    message = messages_pb2.InboundMessage(
        channel="telegram",
        account="default",
        sender=sender,
        chat=chat,
        text=text,
        message_id=message_id,
        mentions_bot=bool(group),
        received_at_ms=int(time.time() * 1000),
    )

    async def send() -> None:
        nc = await nats.connect(url)
        try:
            msg_id = f"telegram:default:{message_id}"
            await bus.js_publish(nc.jetstream(), SUBJECTS.inbound("telegram"), message, msg_id)
        finally:
            await nc.close()

    asyncio.run(send())


def parts(url: str) -> list[messages_pb2.OutboundMessage]:
    async def read() -> list[messages_pb2.OutboundMessage]:
        nc = await nats.connect(url)
        try:
            return [p for _, p in await outbound_parts(nc.jetstream())]
        finally:
            await nc.close()

    return asyncio.run(read())


def answer_to(url: str, message_id: str, timeout: float = 60) -> str:
    """The text of the router's answer to the chat command ``message_id``."""

    def find() -> str | None:
        for p in parts(url):
            if p.run_id.startswith("command:") and list(p.message_ids) == [message_id]:
                return p.text
        return None

    text: str = wait_for(find, timeout=timeout, what=f"the answer to {message_id}")
    return text
