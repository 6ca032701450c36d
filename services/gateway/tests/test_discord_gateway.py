"""Discord's gateway connection (SB_DISCORD_GATEWAY) against the fake Discord's WebSocket over
real sockets: it identifies with the bot token and the message intents, heartbeats with the
last sequence, turns DMs and mentions into inbound messages, resumes a dropped or dead
connection (Discord replaying what was missed), identifies afresh after an invalid session,
stops for good on a refused token, and runs on one replica only, under the channel lease."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchboard import registry
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.discord import DiscordAdapter, from_settings
from switchboard_gateway.channels.discord_gateway import INTENTS, DiscordGatewayConnection
from switchboard_gateway.config import GatewaySettings
from tests.fakes.discord import FakeDiscord
from tests.fakes.discord_interactions import user
from tests.fakes.discord_ws import FakeGateway, message_create

GUILD, CHANNEL, DM = "4400000000000000001", "4200000000000000001", "4500000000000000001"
PERSON = "4100000000000000001"


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


class Bot:
    """A connection run as a task, publishing into a list (``fail`` publishes raise)."""

    def __init__(self, discord: FakeDiscord, token: str | None = None) -> None:
        self.http = httpx.AsyncClient(base_url=discord.base_url)
        self.published: list[messages_pb2.InboundMessage] = []
        self.fail = 0
        self.connection = DiscordGatewayConnection(
            token or discord.token, lambda: self.http, self.publish, min_backoff_s=0.05
        )
        self.connection.new_session_pause_s = (0.0, 0.0)
        self.task = asyncio.create_task(self.connection.run())

    async def publish(self, message: messages_pb2.InboundMessage) -> None:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("the bus is away")
        self.published.append(message)

    async def until(self, check: Callable[[], object]) -> None:
        await eventually(lambda: check() or self.task.done())
        assert not self.task.done(), self.task

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.http.aclose()


@pytest.fixture
async def bot(discord: FakeDiscord) -> AsyncIterator[Bot]:
    running = Bot(discord)
    await running.until(lambda: running.connection.session is not None)
    yield running
    await running.stop()


def message(content: str, *, guild: bool = False, **extra: Any) -> dict[str, Any]:
    return message_create(
        content, channel_id=CHANNEL if guild else DM, guild_id=GUILD if guild else None, **extra
    )


async def test_identifies_heartbeats_and_publishes_dms_and_mentions(
    discord: FakeDiscord,
) -> None:
    discord.gateway.heartbeat_interval_ms = 50
    bot = Bot(discord)
    try:
        await bot.until(lambda: bot.connection.bot_id == discord.bot_id)
        [identify] = discord.gateway.identifies
        assert identify["intents"] == INTENTS == (1 << 9) | (1 << 12)  # no privileged intent
        assert identify["properties"]["browser"] == "switchboard"
        mention = f"<@{discord.bot_id}> what time is it?"
        sent = [
            message("hello in a DM"),
            message(mention, guild=True, mentions=[user(discord.bot_id, "switchboard")]),
            message("", guild=True),  # not mentioned: no content without MESSAGE_CONTENT
            message("my own reply", author=user(discord.bot_id)),
            message("another bot", author={"id": "9", "username": "other", "bot": True}),
            message("a pin", type=6),
            message("see this", attachments=[{"id": "1", "url": "https://cdn.example/a.png"}]),
        ]
        for data in sent:
            discord.gateway.dispatch("MESSAGE_CREATE", data)
        await bot.until(lambda: len(bot.published) == 3)
        dm, mentioned, attached = bot.published
        assert (dm.channel, dm.account, dm.message_id) == ("discord", "default", sent[0]["id"])
        assert (dm.sender, dm.chat.id, dm.chat.type, dm.text) == (
            PERSON,
            DM,
            "direct",
            "hello in a DM",
        )
        assert not dm.mentions_bot
        assert (mentioned.chat.id, mentioned.chat.type) == (CHANNEL, "group")
        assert mentioned.mentions_bot and mentioned.text == "what time is it?"
        assert list(attached.media) == ["https://cdn.example/a.png"]
        # Heartbeats carry the last sequence handled.
        last = 1 + len(sent)  # READY, then the messages
        await seen(discord, lambda g: bool(g.heartbeats) and g.heartbeats[-1] == last)
    finally:
        await bot.stop()


async def test_a_dropped_connection_resumes_and_gets_what_it_missed(
    bot: Bot, discord: FakeDiscord
) -> None:
    session = bot.connection.session
    assert session is not None
    discord.gateway.close(4000)  # Discord's "unknown error": reconnect and resume
    missed = message("sent while the bot was away")
    discord.gateway.dispatch("MESSAGE_CREATE", missed)  # queued behind the close: not sent
    await bot.until(lambda: len(bot.published) == 1)
    assert bot.published[0].message_id == missed["id"]
    assert discord.gateway.resumes == [{"session_id": session.id, "seq": 1}]
    assert len(discord.gateway.identifies) == 1  # resumed, not a new session
    discord.gateway.reconnect()  # op 7: resume again
    await seen(discord, lambda g: len(g.resumes) == 2)
    assert discord.gateway.resumes[1]["seq"] == 3  # READY, the missed message, RESUMED


async def test_an_unacknowledged_heartbeat_means_a_new_connection(discord: FakeDiscord) -> None:
    discord.gateway.heartbeat_interval_ms = 50
    discord.gateway.ack_heartbeats = False
    bot = Bot(discord)
    try:
        await seen(discord, lambda g: len(g.resumes) >= 1)
        assert discord.gateway.connections >= 2 and len(discord.gateway.identifies) == 1
    finally:
        await bot.stop()


async def test_an_invalid_session_identifies_afresh(bot: Bot, discord: FakeDiscord) -> None:
    discord.gateway.invalidate(resumable=False)
    await seen(discord, lambda g: len(g.identifies) == 2)
    assert discord.gateway.resumes == []
    await bot.until(lambda: bot.connection.session is not None)


async def test_a_failed_publish_is_resumed_and_replayed(bot: Bot, discord: FakeDiscord) -> None:
    bot.fail = 1
    first = message("one")
    discord.gateway.dispatch("MESSAGE_CREATE", first)
    await bot.until(lambda: len(bot.published) == 1)
    assert bot.published[0].message_id == first["id"]
    assert discord.gateway.resumes[0]["seq"] == 1  # from before the failed event


async def test_a_refused_token_stops_reconnecting(discord: FakeDiscord) -> None:
    refused = Bot(discord, token="not-the-token")  # GET /gateway/bot answers 401
    try:
        await refused.until(lambda: refused.connection.fatal != "")
        assert "401" in refused.connection.fatal
        assert discord.gateway.connections == 0 and not refused.task.done()
    finally:
        await refused.stop()
    discord.gateway.token = "another-token"  # the REST API takes the token, IDENTIFY not
    closed = Bot(discord)
    try:
        await closed.until(lambda: closed.connection.fatal != "")
        assert "4004" in closed.connection.fatal and discord.token not in closed.connection.fatal
        assert discord.gateway.connections == 1 and not closed.task.done()
    finally:
        await closed.stop()


def settings_for(home: Path, nats_url: str, discord: FakeDiscord) -> GatewaySettings:
    return GatewaySettings.from_environ(
        {},
        home=home,
        nats_url=nats_url,
        log_json=False,
        discord_bot_token=discord.token,
        discord_public_key=discord.interactions.public_key,
        discord_api_base=discord.base_url,
        discord_gateway=True,
    )


async def test_one_replica_holds_the_connection_and_another_takes_over(
    nats_url: str, tmp_path: Path, discord: FakeDiscord
) -> None:
    settings = settings_for(tmp_path, nats_url, discord)
    async with ServiceRuntime(registry.get("gateway"), settings, asyncio.Event()) as rt:
        first, second = from_settings(settings), from_settings(settings)
        assert isinstance(first, DiscordAdapter) and isinstance(second, DiscordAdapter)
        await first.start(rt)
        await seen(discord, lambda g: len(g.identifies) == 1)
        await second.start(rt)
        try:
            data = message("hello")
            discord.gateway.dispatch("MESSAGE_CREATE", data)
            inbound = rt.subjects.stream("INBOUND")
            deadline = time.monotonic() + 20
            while (await rt.js.stream_info(inbound)).state.messages < 1:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            raw = await rt.js.get_last_msg(inbound, rt.subjects.inbound("discord"))
            assert messages_pb2.InboundMessage.FromString(raw.data or b"").message_id == data["id"]
            assert discord.gateway.connections == 1  # the second replica waits for the lease
            await first.close()  # releases the lease: the second connects
            await seen(discord, lambda g: len(g.identifies) == 2)
            connection = second.connection
            assert connection is not None
            await eventually(lambda: connection.session is not None)
        finally:
            await first.close()
            await second.close()


async def eventually(check: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("never happened")
        await asyncio.sleep(0.01)


async def seen(discord: FakeDiscord, check: Callable[[FakeGateway], bool]) -> None:
    """Until the fake gateway has seen it (waiting in a thread: the bot runs on this loop)."""
    await asyncio.to_thread(discord.gateway.wait_for, check)
