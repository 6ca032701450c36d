"""Discord's approval buttons: the gateway in-process on a real nats-server with the real
Discord adapter against the fake Discord. A notice goes out with an action row of two buttons;
a click (a signed MESSAGE_COMPONENT interaction) is answered with a deferred update (type 6)
and published as the command it stands for from the clicker, carrying the interaction for the
answer; a click on a component that is not ours is acknowledged and publishes nothing; the
answer edits the clicked message (content and verdict, no components) when the click decided,
else follows up ephemerally; an unsigned click is 401."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.discord_buttons import notice_components
from tests.fakes.discord import DiscordInteractions, FakeDiscord
from tests.fakes.discord_rest import message_object

from .test_discord import GUILD, DiscordGateway, discord_gateway

CHANNEL = "4200000000000000005"
CLICKER = "4100000000000000102"
APPROVAL = "ap_3f9a2c1b0011223344ff"


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path, discord: FakeDiscord) -> AsyncIterator[DiscordGateway]:
    async with discord_gateway(nats_url, tmp_path, discord) as gateway:
        yield gateway


def notice(text: str = "Approval needed: `get_time`") -> messages_pb2.OutboundMessage:
    return messages_pb2.OutboundMessage(
        run_id=f"approval:{APPROVAL}",
        chat=messages_pb2.ChatRef(id=CHANNEL, type="group"),
        text=text,
        approval_id=APPROVAL,
    )


async def deliver(gw: DiscordGateway, part: messages_pb2.OutboundMessage) -> None:
    for message in gw.adapter.format(part):
        await gw.adapter.send("default", message)


async def test_a_notice_gets_buttons_and_a_click_is_published_as_its_command(
    gw: DiscordGateway, discord: FakeDiscord
) -> None:
    long = gw.adapter.format(notice("word " * 600))  # two messages: the buttons on the last
    assert "components" not in long[0].payload["json"]
    assert long[1].payload["json"]["components"] == notice_components(APPROVAL)
    assert (
        "components"
        not in gw.adapter.format(
            messages_pb2.OutboundMessage(
                chat=messages_pb2.ChatRef(id=CHANNEL), text="hi", approval_id="ap_../x"
            )
        )[0].payload["json"]
    )
    await deliver(gw, notice())
    [sent] = discord.messages_in(CHANNEL)
    [row] = sent.components
    assert [(b["label"], b["custom_id"]) for b in row["components"]] == [
        ("Approve", "ap:3f9a2c1b0011223344ff:y"),
        ("Deny", "ap:3f9a2c1b0011223344ff:n"),
    ]
    shown = message_object(sent, discord.bot_id)
    click = gw.signer.click(shown, "ap:3f9a2c1b0011223344ff:n", user_id=CLICKER, guild_id=GUILD)
    response = await gw.post(click)
    assert response.status_code == 200, response.text
    assert response.json() == {"type": 6}
    [(msg_id, published)] = await gw.inbound()
    assert msg_id == f"discord:default:{click['id']}"
    assert (published.sender, published.chat.id, published.chat.type) == (CLICKER, CHANNEL, "group")
    assert (published.text, published.mentions_bot) == ("/deny 3f9a2c1b0011223344ff", True)
    assert (published.click.message_id, published.click.by) == (sent.id, "Ada")
    assert published.reply_context["interaction_token"] == click["token"]
    assert published.reply_context["message_content"] == sent.content

    # Not our component, or not a button: acknowledged, nothing published.
    for other in (
        gw.signer.click(shown, "someone-elses:button", user_id=CLICKER, guild_id=GUILD),
        {
            **click,
            "id": "4300000000000000077",
            "data": {"custom_id": click["data"]["custom_id"], "component_type": 3},
        },
    ):
        response = await gw.post(other)
        assert response.status_code == 200 and response.json() == {"type": 6}
    assert len(await gw.inbound()) == 1
    # An unsigned click: 401, nothing published.
    stranger = DiscordInteractions(gw.signer.application_id)
    body, headers = stranger.request(click)
    response = await gw.client.post("/channels/discord/default", content=body, headers=headers)
    assert response.status_code == 401
    assert len(await gw.inbound()) == 1


async def test_the_answer_edits_the_clicked_message_or_follows_up_to_the_clicker(
    gw: DiscordGateway, discord: FakeDiscord
) -> None:
    await deliver(gw, notice())
    [sent] = discord.messages_in(CHANNEL)
    shown = message_object(sent, discord.bot_id)

    async def clicked(decision: str, text: str) -> str:
        click = gw.signer.click(shown, "ap:3f9a2c1b0011223344ff:y", user_id=CLICKER, guild_id=GUILD)
        response = await gw.post(click)
        assert response.status_code == 200
        # What Discord does with the deferred update: the clicked message becomes @original.
        discord.record_response(click["token"], response.json(), sent.id)
        [*_, (_, inbound)] = await gw.inbound()
        answer = messages_pb2.OutboundMessage(
            chat=inbound.chat, text=text, reply_context=inbound.reply_context, click=inbound.click
        )
        answer.click.decision = decision
        await deliver(gw, answer)
        return str(click["token"])

    token = await clicked("", "You may not decide this approval.")
    [followup] = discord.interaction(token).followups
    assert (followup.content, followup.flags) == ("You may not decide this approval.", 64)
    [now] = discord.messages_in(CHANNEL)[:1]
    assert now.edits == 0

    await clicked("approved", "Approved: the call to get_time (3f9a2c1b).")
    [edited] = [m for m in discord.messages_in(CHANNEL) if m.id == sent.id]
    assert edited.content == f"{sent.content}\n\n**Approved by Ada**"
    assert edited.components == [] and edited.allowed_mentions == {"parse": []}
