"""Discord's interactions endpoint at POST /channels/discord/default: the gateway in-process on a
real nats-server with the real Discord adapter, fed interactions in Discord's own shapes signed
with an Ed25519 key as Discord signs them. PING is answered with PONG; a slash command is
answered with a deferred response (type 5) and published once, carrying the interaction's token
for the reply; anything unsigned, stale or malformed is refused and publishes nothing."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchboard import registry
from switchboard.errors import ConfigError
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.app import create_app
from switchboard_gateway.channels import configured_adapters
from switchboard_gateway.channels.base import InboundRequest, Unauthorized
from switchboard_gateway.channels.discord import DiscordAdapter, from_settings
from switchboard_gateway.config import GatewaySettings
from tests.fakes.discord import DiscordInteractions, FakeDiscord
from tests.support.streams import stored as stream_messages

from .gateway_harness import absent_address, client_on

HOOK = "/channels/discord/default"
TOKEN = f"gw-{uuid.uuid4().hex}"
GUILD = "4400000000000000001"


@dataclass
class DiscordGateway:
    rt: ServiceRuntime
    client: httpx.AsyncClient
    adapter: DiscordAdapter
    signer: DiscordInteractions

    async def post(self, payload: dict[str, Any] | bytes, **signing: Any) -> httpx.Response:
        body, headers = self.signer.request(payload, **signing)
        return await self.client.post(HOOK, content=body, headers=headers)

    async def inbound(self) -> list[tuple[str, messages_pb2.InboundMessage]]:
        """(Nats-Msg-Id, message) of everything INBOUND holds."""
        stream = self.rt.subjects.stream("INBOUND")
        found = await stream_messages(self.rt.js, stream, messages_pb2.InboundMessage)
        return [(s.msg_id, s.message) for s in found]


def settings_for(home: Path, nats_url: str, **discord: str) -> GatewaySettings:
    return GatewaySettings.from_environ(
        {}, home=home, nats_url=nats_url, gateway_token=TOKEN, log_json=False, **discord
    )


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


@asynccontextmanager
async def discord_gateway(
    nats_url: str, home: Path, discord: FakeDiscord
) -> AsyncIterator[DiscordGateway]:
    signer = discord.interactions
    with absent_address() as agent_addr, absent_address() as router_addr:
        settings = settings_for(
            home,
            nats_url,
            agent_addr=agent_addr,
            router_addr=router_addr,
            discord_bot_token=discord.token,
            discord_public_key=signer.public_key,
            discord_api_base=discord.base_url,
        )
        adapters = configured_adapters(settings)
        adapter = adapters["discord"]
        assert isinstance(adapter, DiscordAdapter)
        async with ServiceRuntime(registry.get("gateway"), settings, asyncio.Event()) as rt:
            await adapter.start(rt)
            app = create_app(settings, rt, adapters)
            async with app.router.lifespan_context(app), client_on(app) as client:
                yield DiscordGateway(rt, client, adapter, signer)
            await adapter.close()


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path, discord: FakeDiscord) -> AsyncIterator[DiscordGateway]:
    async with discord_gateway(nats_url, tmp_path, discord) as gateway:
        yield gateway


async def test_ping_is_answered_with_pong_and_publishes_nothing(gw: DiscordGateway) -> None:
    response = await gw.post(gw.signer.ping())
    assert response.status_code == 200, response.text
    assert response.json() == {"type": 1}
    assert await gw.inbound() == []


async def test_a_bad_or_missing_signature_is_401_and_nothing_is_published(
    gw: DiscordGateway,
) -> None:
    command = gw.signer.slash_command("hello", guild_id=GUILD)
    body, headers = gw.signer.request(command)
    other = DiscordInteractions(gw.signer.application_id)  # another application's key
    signature = headers["x-signature-ed25519"]
    flipped = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    refused = [
        (body, {}),
        (body, {k: v for k, v in headers.items() if k != "x-signature-ed25519"}),
        (body, {k: v for k, v in headers.items() if k != "x-signature-timestamp"}),
        (body, {**headers, "x-signature-ed25519": flipped}),
        (body, {**headers, "x-signature-ed25519": "zz" * 64}),  # not hex
        (body, {**headers, "x-signature-ed25519": signature[:64]}),  # too short
        (
            body,
            {**headers, "x-signature-ed25519": other.request(command)[1]["x-signature-ed25519"]},
        ),
        (
            body,
            {**headers, "x-signature-timestamp": str(int(headers["x-signature-timestamp"]) + 1)},
        ),
        (body, {**headers, "x-signature-timestamp": "12ab"}),
        (body.replace(b"hello", b"hullo"), headers),  # the body is not the one signed
    ]
    for content, sent in refused:
        response = await gw.client.post(HOOK, content=content, headers=sent)
        assert response.status_code == 401, (sent, response.text)
        assert response.json()["error"]["code"] == "channel_refused"
    assert await gw.inbound() == []
    accepted = await gw.client.post(HOOK, content=body, headers=headers)
    assert accepted.status_code == 200, accepted.text
    assert [msg_id for msg_id, _ in await gw.inbound()] == [f"discord:default:{command['id']}"]


async def test_a_stale_or_replayed_interaction_is_refused(gw: DiscordGateway) -> None:
    command = gw.signer.slash_command("hello")
    now = int(gw.signer.now())
    for stamp in (now - 3600, now + 3600):  # validly signed, but far from now
        response = await gw.post(command, timestamp=stamp)
        assert response.status_code == 401, response.text
        assert "stale" in response.json()["error"]["message"]
    assert await gw.inbound() == []


def test_the_replay_window_edges() -> None:
    """The adapter's clock is injectable: five minutes either way is accepted, a second more
    is not."""
    signer = DiscordInteractions()
    clock = [1_700_000_000.0]
    adapter = DiscordAdapter("bot-token", signer.public_key, now=lambda: clock[0])
    body = json.dumps(signer.ping()).encode()

    def call(stamp: int) -> InboundRequest:
        return InboundRequest("discord", "default", signer.sign(body, stamp), body, 0)

    for stamp in (1_700_000_000 - 300, 1_700_000_000 + 300):
        adapter.verify(call(stamp))
    for stamp in (1_700_000_000 - 301, 1_700_000_000 + 301):
        with pytest.raises(Unauthorized, match="stale"):
            adapter.verify(call(stamp))
    clock[0] += 301  # the same signed call, verified later
    with pytest.raises(Unauthorized):
        adapter.verify(call(1_700_000_000))


async def test_a_slash_command_is_deferred_and_published_once_with_its_reply_context(
    gw: DiscordGateway,
) -> None:
    command = gw.signer.slash_command(
        "what time is it?",
        user_id="4100000000000000007",
        channel_id="4200000000000000009",
        guild_id=GUILD,
    )
    for _ in range(2):  # Discord sending it again (or a replay) is the same message
        response = await gw.post(command)
        assert response.status_code == 200, response.text
        assert response.json() == {"type": 5}  # DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE
    [(msg_id, message)] = await gw.inbound()
    assert msg_id == f"discord:default:{command['id']}"
    assert (message.channel, message.account, message.message_id) == (
        "discord",
        "default",
        command["id"],
    )
    assert (message.sender, message.chat.id, message.chat.type) == (
        "4100000000000000007",
        "4200000000000000009",
        "group",
    )
    assert message.text == "what time is it?"
    assert message.mentions_bot  # addressed to the bot
    assert dict(message.reply_context) == {
        "interaction_token": command["token"],
        "application_id": gw.signer.application_id,
        "interaction_id": command["id"],
    }
    assert message.received_at_ms > 0


async def test_no_typing_where_a_deferred_response_shows_thinking(
    gw: DiscordGateway, discord: FakeDiscord
) -> None:
    command = gw.signer.slash_command("hi", channel_id="4200000000000000009", guild_id=GUILD)
    assert (await gw.post(command)).json() == {"type": 5}
    for channel in ("4200000000000000009", "4200000000000000010"):
        await gw.adapter.typing("default", messages_pb2.ChatRef(id=channel, type="group"), "")
    assert [(c.route, c.status) for c in discord.calls] == [("typing", 204)]  # the other one


async def test_a_command_in_a_dm_and_a_subcommand(gw: DiscordGateway) -> None:
    dm = gw.signer.slash_command("hi there", user_id="4100000000000000002", channel_id="4500")
    sub = gw.signer.slash_command("unused", guild_id=GUILD)
    sub["data"]["options"] = [
        {
            "name": "code",
            "type": 1,
            "options": [
                {"name": "language", "type": 3, "value": "python"},
                {"name": "lines", "type": 4, "value": 20},
                {"name": "question", "type": 3, "value": "what does this do?"},
            ],
        }
    ]
    for payload in (dm, sub):
        response = await gw.post(payload)
        assert response.json() == {"type": 5}, response.text
    [(_, direct), (_, group)] = await gw.inbound()
    assert (direct.sender, direct.chat.id, direct.chat.type) == (
        "4100000000000000002",
        "4500",
        "direct",
    )
    assert not direct.mentions_bot
    assert group.text == "python\nwhat does this do?"


async def test_a_command_without_text_gets_a_hint_and_publishes_nothing(gw: DiscordGateway) -> None:
    command = gw.signer.slash_command("   ", guild_id=GUILD)
    response = await gw.post(command)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["type"] == 4 and answer["data"]["flags"] == 64  # ephemeral
    assert "/ask" in answer["data"]["content"]
    assert await gw.inbound() == []


async def test_unknown_types_and_malformed_interactions_are_400(gw: DiscordGateway) -> None:
    good = gw.signer.slash_command("hello", guild_id=GUILD)

    def changed(**fields: Any) -> dict[str, Any]:
        return {**good, **fields}

    refused: list[dict[str, Any] | bytes] = [
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        {**gw.signer.ping(), "type": 3},  # MESSAGE_COMPONENT without its channel or message
        {**gw.signer.ping(), "type": 4},  # APPLICATION_COMMAND_AUTOCOMPLETE
        {**gw.signer.ping(), "type": "2"},
        changed(id="not-a-snowflake"),
        changed(token="../../channels/1/messages"),
        changed(channel_id=None, channel=None),
        changed(member={"user": {"id": 5}}),
        changed(member="nobody"),
        changed(data={"name": "ask", "options": "prompt"}),
        changed(data={"options": [{"name": "prompt", "type": 3, "value": "x"}]}),
        changed(data={"name": "ask", "options": [{"name": "prompt", "type": 3, "value": 7}]}),
        changed(
            data={"name": "ask", "options": [{"name": "prompt", "type": 3, "value": "x" * 20_000}]}
        ),
    ]
    for payload in refused:
        response = await gw.post(payload)
        assert response.status_code == 400, (payload, response.text)
        assert response.json()["error"]["code"] == "channel_refused"
    assert await gw.inbound() == []


def test_from_settings_needs_both_or_neither_and_a_real_key(tmp_path: Path) -> None:
    key = DiscordInteractions().public_key
    assert from_settings(settings_for(tmp_path, "nats://x")) is None
    for partial in ({"discord_bot_token": "t"}, {"discord_public_key": key}):
        with pytest.raises(ConfigError, match="both"):
            from_settings(settings_for(tmp_path, "nats://x", **partial))
    for bad in ("abc", "zz" * 32, key + "00"):
        with pytest.raises(ConfigError, match="64 hex digits"):
            from_settings(
                settings_for(tmp_path, "nats://x", discord_bot_token="t", discord_public_key=bad)
            )
    with pytest.raises(ConfigError, match="APPLICATION_ID"):
        from_settings(
            settings_for(
                tmp_path,
                "nats://x",
                discord_bot_token="t",
                discord_public_key=key,
                discord_application_id="my-app",
            )
        )
    secret = f"bot-{uuid.uuid4().hex}"
    adapter = from_settings(
        settings_for(tmp_path, "nats://x", discord_bot_token=secret, discord_public_key=key)
    )
    assert isinstance(adapter, DiscordAdapter)
    assert secret not in repr(adapter)
