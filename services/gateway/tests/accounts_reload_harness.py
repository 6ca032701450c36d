"""A gateway whose channel accounts change while it runs (test_accounts_reload.py): wired as
``serve()`` wires it (channels/live.py started, webhooks routed, the real delivery consumer,
``server.reload_accounts``' hook registered), in-process on a real nats-server. A change goes
the way a changed configuration file's does: :func:`switchboard.reloads.apply` builds the
gateway's settings from its environment with the new variables and calls the hook."""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nats
from nats.js.errors import KeyNotFoundError

from switchboard import registry, reloads
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.app import create_app
from switchboard_gateway.channels.accounts import Accounts
from switchboard_gateway.channels.base import ChannelAdapter
from switchboard_gateway.channels.live import LiveChannels
from switchboard_gateway.channels.typing import Typing
from switchboard_gateway.config import GatewaySettings
from switchboard_gateway.delivery import Delivery
from switchboard_gateway.server import reload_accounts
from tests.support.streams import ensure_streams_short_leases
from tests.support.streams import stored as stream_messages

from .accounts_harness import GATEWAY_TOKEN, Served
from .gateway_harness import absent_address, client_on

WAIT_S = 30.0  # a bound on waiting for an event, never an assertion on durations


@dataclass
class Live(Served):
    live: LiveChannels

    def channel(self, name: str) -> Accounts:
        return self.live.channels[name]

    async def change(self, **variables: Any) -> None:
        """What a changed file hands the running services: ``SB_<NAME>`` variables (dicts as
        the JSON the file's tables become; None: no longer set)."""
        changes: dict[str, str | None] = {}
        for key, value in variables.items():
            text = json.dumps(value) if isinstance(value, dict) else value
            changes[f"SB_{key.upper()}"] = text
        await reloads.apply(changes)

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return await self.client.post(path, content=body, headers=headers)

    async def dead_letters(self) -> list[messages_pb2.DeadLetter]:
        stream = self.rt.subjects.stream("DEADLETTER")
        found = await stream_messages(self.rt.js, stream, messages_pb2.DeadLetter)
        return [s.message for s in found]

    async def reply_to(self, account: str, channel: str, chat: str, text: str) -> None:
        inbound = messages_pb2.InboundMessage(
            channel=channel,
            account=account,
            chat=messages_pb2.ChatRef(id=chat, type="direct"),
            message_id=f"m-{uuid.uuid4().hex[:8]}",
        )
        await self.reply(inbound, text)


def environ_for(home: Path, nats_url: str, agent_addr: str, **values: str) -> dict[str, str]:
    environ = {
        "SB_HOME": str(home),
        "SB_GATEWAY_TOKEN": GATEWAY_TOKEN,
        "SB_NATS_URL": nats_url,
        "SB_AGENT_ADDR": agent_addr,
        "SB_LOG_JSON": "false",
    }
    environ.update({f"SB_{k.upper()}": v for k, v in values.items()})
    return environ


@asynccontextmanager
async def live_gateway(nats_url: str, home: Path, **values: str) -> AsyncIterator[Live]:
    """The gateway with ``SB_<NAME>`` = value for each of ``values`` in its environment."""
    admin = await nats.connect(nats_url)
    await ensure_streams_short_leases(admin.jetstream())  # a released lease is taken at once
    await admin.close()
    with absent_address() as agent_addr:
        environ = environ_for(home, nats_url, agent_addr, **values)
        settings = GatewaySettings.from_environ(environ)
        marker = reloads.ENVIRON.set(environ)  # what switchboard.host does for a service
        try:
            async with AsyncExitStack() as stack:
                rt = await stack.enter_async_context(
                    ServiceRuntime(registry.get("gateway"), settings, asyncio.Event())
                )
                typing = Typing(rt.nc, rt.subjects)
                live = LiveChannels(rt, typing, None)
                stack.push_async_callback(live.close)
                await live.start(settings)
                channels: dict[str, ChannelAdapter] = dict(live.channels)
                app = create_app(settings, rt, channels, typing)
                await Delivery(channels, concurrency=4, max_attempts=3).start(rt)
                reload_accounts(settings, rt, app, live, channels, typing)
                await stack.enter_async_context(app.router.lifespan_context(app))
                client = await stack.enter_async_context(client_on(app))
                yield Live(rt, client, channels, live)
        finally:
            reloads.ENVIRON.reset(marker)


async def eventually(what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    """``check()``'s value (awaited when it is a coroutine) once it is true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        await asyncio.sleep(0.05)


async def inbound_of(gw: Live, account: str, count: int = 1) -> list[messages_pb2.InboundMessage]:
    """The messages of ``account`` on INBOUND (the router's input), once there are ``count``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        found = [m for m in await gw.inbound() if m.account == account]
        if len(found) >= count:
            return found
        if loop.time() > deadline:
            raise AssertionError(f"{len(found)} inbound messages of {account!r}, not {count}")
        await asyncio.sleep(0.05)


async def lease_value(gw: Live, key: str) -> bytes | None:
    """Who holds the channel lease ``key`` (its value); None when no one does."""
    kv = await gw.rt.js.key_value(gw.rt.subjects.channel_lease_bucket)
    try:
        entry = await kv.get(key)
    except KeyNotFoundError:  # also deleted (released)
        return None
    return entry.value
