"""Discord end to end: every service as a real process, the gateway configured for Discord
against the fake Discord REST API. A signed slash command posted to the gateway's interactions
endpoint is answered with a deferred response, routed, run through the agent's tool loop, and
its reply arrives at Discord as the edit of the interaction's response (and follow-ups for the
further parts), exactly once, even when Discord's call comes twice. A DM over the gateway
connection (SB_DISCORD_GATEWAY) is answered with a message in the DM."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from tests.fakes.discord import FakeDiscord
from tests.fakes.discord_ws import message_create
from tests.fakes.llm import FakeRequest, Reply, tool_then_text
from tests.lanes.pipeline import wait_consumed, wait_settled
from tests.support.services import ServiceProcesses, with_fake_model

GUILD = "4400000000000000001"
CHANNEL = "4200000000000000005"
DM_CHANNEL = "4600000000000000001"
# The answer to a prompt asking for it: long enough for the agent to send it in several parts.
STORY = "\n\n".join(
    " ".join(f"Sentence {p}.{s} of the long answer." for s in range(12)) for p in range(8)
)


def script(req: FakeRequest) -> Reply:
    """tool_then_text (a get_time call, then "Tool said: <result>"), and the story after it
    when the prompt asks for a long answer."""
    reply = tool_then_text()(req)
    if reply.text and "long" in req.last_user_text:
        reply.text += "\n\n" + STORY
    return reply


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


@pytest.fixture
def services(
    tmp_path: Path, nats_url: str, database_url: str, discord: FakeDiscord
) -> Iterator[ServiceProcesses]:
    env = {
        "SB_DISCORD_BOT_TOKEN": discord.token,
        "SB_DISCORD_PUBLIC_KEY": discord.interactions.public_key,
        "SB_DISCORD_APPLICATION_ID": discord.interactions.application_id,
        "SB_DISCORD_API_BASE": discord.base_url,
        "SB_DISCORD_GATEWAY": "true",
        "SB_LOG_LEVEL": "INFO",
        "SB_DISCORD_GROUPS": f'["{CHANNEL}"]',  # groups are closed by default (docs/trust.md)
    }
    with with_fake_model(tmp_path, nats_url, database_url, script, env) as procs:
        yield procs


async def settle(nats_url: str) -> None:
    """Until the router, the agents and Discord delivery are done with everything so far
    (OUTBOUND is a work queue: a delivered part is gone from it)."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await wait_settled(js)
        await wait_consumed(js, "OUTBOUND", "deliver-discord", timeout=60)
    finally:
        await nc.close()


def words(text: str) -> list[str]:
    return text.split()


def test_slash_commands_are_answered_through_their_interactions_exactly_once(
    services: ServiceProcesses, discord: FakeDiscord, nats_url: str
) -> None:
    endpoint = f"{services.url}/channels/discord/default"
    command = discord.interactions.slash_command(
        "what time is it? give me the long answer", channel_id=CHANNEL, guild_id=GUILD
    )
    token = command["token"]
    for _ in range(2):  # Discord's call, and the same call again
        answer = discord.send_interaction(endpoint, command)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"type": 5}

    asyncio.run(settle(nats_url))
    llm = services.llm  # type: ignore[attr-defined]
    assert len(llm.calls) == 2, llm.calls  # one run (a tool call, then the answer), not two
    assert llm.calls[0].reply.tool_calls and llm.calls[0].request.tools
    full = llm.calls[1].reply.text
    assert full.startswith("Tool said: ") and STORY in full

    interaction = discord.interaction(token)
    assert interaction.original is not None
    # Part 0 replaced the "thinking..." response; the later parts are its follow-ups, sent
    # in whatever order delivery took them, each once: in the answer's order, they are it.
    original = interaction.original.content
    followups = [m.content for m in interaction.followups]
    assert original.startswith("Tool said: ") and interaction.original.edits == 1
    assert len(followups) >= 2, followups
    ordered = [original, *sorted(followups, key=full.index)]
    assert words("\n".join(ordered)) == words(full)
    channel = discord.messages_in(CHANNEL)
    assert len(channel) == 1 + len(followups)
    assert all(m.allowed_mentions == {"parse": []} for m in channel)
    hook_calls = [c for c in discord.calls if c.route in ("original", "followup")]
    assert all(c.status == 200 and not c.authorization for c in hook_calls)
    assert len(hook_calls) == len(channel)  # no retries, no duplicates

    # A command in a DM with the bot: a short answer, the response's edit alone.
    dm = discord.interactions.slash_command("what time is it?", channel_id="4500")
    answer = discord.send_interaction(endpoint, dm)
    assert answer.json() == {"type": 5}, answer.text
    asyncio.run(settle(nats_url))
    assert len(llm.calls) == 4
    reply = discord.interaction(dm["token"])
    assert reply.original is not None and reply.original.content == llm.calls[3].reply.text
    assert reply.original.content.startswith("Tool said: ") and reply.followups == []

    # A plain DM over the gateway connection (SB_DISCORD_GATEWAY): answered in the DM channel.
    discord.gateway.wait_for(lambda g: len(g.identifies) == 1 and g.connections == 1)
    hello = message_create("what time is it, over the gateway?", channel_id=DM_CHANNEL)
    discord.gateway.dispatch("MESSAGE_CREATE", hello)
    [sent] = discord.wait_for(lambda d: d.messages_in(DM_CHANNEL))
    asyncio.run(settle(nats_url))
    assert len(llm.calls) == 6
    assert sent.via == "bot" and sent.content == llm.calls[5].reply.text
    assert sent.content.startswith("Tool said: ") and sent.allowed_mentions == {"parse": []}
    assert discord.messages_in(DM_CHANNEL) == [sent]  # once
