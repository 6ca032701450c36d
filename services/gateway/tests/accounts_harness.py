"""The gateway as ``serve()`` wires it (adapters started, webhooks routed, the real delivery
consumer on), in-process on a real nats-server, for the tests of several accounts per channel
(test_channel_accounts*.py). ``Served.reply`` publishes a reply part as the agent does for an
inbound message: its channel, account and chat."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from switchboard import bus, registry
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.app import create_app
from switchboard_gateway.channels import configured_adapters
from switchboard_gateway.channels.base import ChannelAdapter
from switchboard_gateway.config import GatewaySettings
from switchboard_gateway.delivery import Delivery
from tests.support.streams import stored as stream_messages

from .gateway_harness import absent_address, client_on

GATEWAY_TOKEN = f"gw-{uuid.uuid4().hex}"


def secret() -> str:
    return f"tg-webhook-{uuid.uuid4().hex}"


def settings_for(
    home: Path, environ: dict[str, str] | None = None, **values: Any
) -> GatewaySettings:
    return GatewaySettings.from_environ(
        environ or {}, home=home, gateway_token=GATEWAY_TOKEN, log_json=False, **values
    )


@dataclass
class Served:
    rt: ServiceRuntime
    client: httpx.AsyncClient
    adapters: dict[str, ChannelAdapter]

    async def inbound(self) -> list[messages_pb2.InboundMessage]:
        stream = self.rt.subjects.stream("INBOUND")
        found = await stream_messages(self.rt.js, stream, messages_pb2.InboundMessage)
        return [s.message for s in found]

    async def reply(self, inbound: messages_pb2.InboundMessage, text: str) -> None:
        """The reply part the agent publishes for ``inbound``: its channel, account and chat."""
        part = messages_pb2.OutboundMessage(
            run_id=f"run-{uuid.uuid4().hex[:8]}",
            part=0,
            parts=1,
            session_key=f"main:{inbound.channel}:{inbound.chat.id}",
            channel=inbound.channel,
            account=inbound.account,
            chat=inbound.chat,
            text=text,
            message_ids=[inbound.message_id],
        )
        subject = self.rt.subjects.outbound(inbound.channel, inbound.account)
        await bus.js_publish(self.rt.js, subject, part, msg_id=f"{part.run_id}:0")


@asynccontextmanager
async def serving(nats_url: str, home: Path, **values: Any) -> AsyncIterator[Served]:
    """The gateway as ``serve()`` wires it: adapters started, webhooks routed, delivery on."""
    with absent_address() as agent_addr:
        settings = settings_for(home, nats_url=nats_url, agent_addr=agent_addr, **values)
        adapters = configured_adapters(settings)
        async with AsyncExitStack() as stack:
            rt = await stack.enter_async_context(
                ServiceRuntime(registry.get("gateway"), settings, asyncio.Event())
            )
            for adapter in adapters.values():
                await adapter.start(rt)
                stack.push_async_callback(adapter.close)
            await Delivery(adapters, concurrency=4, max_attempts=3).start(rt)
            app = create_app(settings, rt, adapters)
            await stack.enter_async_context(app.router.lifespan_context(app))
            client = await stack.enter_async_context(client_on(app))
            yield Served(rt, client, adapters)


async def eventually_inbound(gw: Served, count: int) -> list[messages_pb2.InboundMessage]:
    for _ in range(500):
        found = await gw.inbound()
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {count} inbound messages")
