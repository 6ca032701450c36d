"""The gateway with the three real chat adapters (Telegram, Slack, Discord) and hooks, served by
uvicorn in this process on a free loopback port against a real nats-server; the platforms are
the fakes of tests/fakes (a fake Bot API, Slack Web API and Discord REST API), and the webhook
calls are signed as each platform signs them.

``async with channels_gateway(nats_url, home) as cg`` gives a :class:`ChannelsGateway`:
``cg.telegram(body)``, ``cg.slack(body)`` and ``cg.discord(body)`` post raw bytes to each
webhook with the platform's valid secret or signature; ``cg.client`` is an HTTP client on the
real socket (a crash is a 500 here, not an exception in the test) and ``cg.address`` the
host:port for WebChat's socket.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from switchboard import registry
from switchboard.runtime import ServiceRuntime
from switchboard.tokens import generate
from switchboard.v1 import messages_pb2
from switchboard_gateway.app import create_app
from switchboard_gateway.channels import configured_adapters
from switchboard_gateway.config import GatewaySettings
from tests.fakes.discord import FakeDiscord
from tests.fakes.discord_interactions import DiscordInteractions
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_events import SlackEvents
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import SECRET_HEADER
from tests.support.streams import stored as stream_messages

from .gateway_harness import absent_address
from .webchat_client import serving

SLACK_BOT = "U0BOT"


@dataclass
class ChannelsGateway:
    rt: ServiceRuntime
    client: httpx.AsyncClient
    address: str
    telegram_secret: str = field(repr=False)
    slack_events: SlackEvents
    discord_signer: DiscordInteractions
    token: str = field(repr=False)
    hooks_token: str = field(repr=False)
    # INBOUND messages before this index are an earlier test's (a gateway shared by a module).
    since: int = 0

    async def telegram(self, body: bytes, account: str = "default") -> httpx.Response:
        headers = {"content-type": "application/json", SECRET_HEADER: self.telegram_secret}
        return await self.client.post(
            f"/channels/telegram/{account}", content=body, headers=headers
        )

    async def slack(self, body: bytes) -> httpx.Response:
        _, headers = self.slack_events.request(body)
        return await self.client.post("/channels/slack/default", content=body, headers=headers)

    async def discord(self, body: bytes) -> httpx.Response:
        _, headers = self.discord_signer.request(body)
        return await self.client.post("/channels/discord/default", content=body, headers=headers)

    async def hook(self, path: str, body: bytes) -> httpx.Response:
        headers = {
            "Authorization": f"Bearer {self.hooks_token}",
            "content-type": "application/json",
        }
        return await self.client.post(path, content=body, headers=headers)

    async def api(self, path: str, body: bytes) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}", "content-type": "application/json"}
        return await self.client.post(path, content=body, headers=headers)

    async def inbound(self) -> list[messages_pb2.InboundMessage]:
        stream = self.rt.subjects.stream("INBOUND")
        found = await stream_messages(self.rt.js, stream, messages_pb2.InboundMessage)
        return [s.message for s in found][self.since :]

    async def mark(self) -> None:
        """From now on :meth:`inbound` shows only what is published after this call."""
        self.since = 0
        self.since = len(await self.inbound())


@asynccontextmanager
async def channels_gateway(
    nats_url: str, home: Path, **overrides: Any
) -> AsyncIterator[ChannelsGateway]:
    token, hooks_token, secret = f"gw-{uuid.uuid4().hex}", generate(), generate()
    slack_events = SlackEvents(bot_user_id=SLACK_BOT)
    async with AsyncExitStack() as stack:
        tg = stack.enter_context(FakeTelegram())
        slack = stack.enter_context(FakeSlack(bot_user_id=SLACK_BOT))
        discord = stack.enter_context(FakeDiscord())
        agent_addr = stack.enter_context(absent_address())
        router_addr = stack.enter_context(absent_address())
        values: dict[str, Any] = {
            "home": home,
            "nats_url": nats_url,
            "gateway_token": token,
            "agent_addr": agent_addr,
            "router_addr": router_addr,
            "reply_timeout_s": 0.5,
            "log_json": False,
            "hooks_token": hooks_token,
            "telegram_bot_token": tg.token,
            "telegram_webhook_secret": secret,
            "telegram_api_base": tg.base_url,
            "slack_bot_token": slack.token,
            "slack_signing_secret": slack_events.secret,
            "slack_api_base": slack.base_url,
            "discord_bot_token": discord.token,
            "discord_public_key": discord.interactions.public_key,
            "discord_api_base": discord.base_url,
        }
        settings = GatewaySettings.from_environ({}, **{**values, **overrides})
        adapters = configured_adapters(settings)
        rt = await stack.enter_async_context(
            ServiceRuntime(registry.get("gateway"), settings, asyncio.Event())
        )
        for adapter in adapters.values():
            await adapter.start(rt)
            stack.push_async_callback(adapter.close)
        app = create_app(settings, rt, adapters)
        await stack.enter_async_context(app.router.lifespan_context(app))
        address = await stack.enter_async_context(serving(app))
        client = await stack.enter_async_context(
            httpx.AsyncClient(base_url=f"http://{address}", timeout=30)
        )
        yield ChannelsGateway(
            rt,
            client,
            address,
            secret,
            slack_events,
            discord.interactions,
            token,
            hooks_token,
        )
