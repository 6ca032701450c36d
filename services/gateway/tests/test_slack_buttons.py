"""Slack's approval buttons: the gateway in-process on a real nats-server with the real Slack
adapter against the fake Slack Web API. A notice goes out with Block Kit (its text as sections,
then an actions block of two buttons); a click (a signed interactivity call on the events
route, the ``payload`` form field) is published as the command it stands for from the clicker;
a bad or missing signature is 401 and publishes nothing; payloads that are not a click on our
buttons publish nothing; the answer updates the notice (no buttons, the verdict as context)
when the click decided, else goes to the clicker alone (``chat.postEphemeral``) in its thread."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard.v1 import messages_pb2
from tests.fakes.slack import FakeSlack, Post, SlackEvents
from tests.fakes.slack_buttons import SlackButtons

from .test_slack import BOT, HOOK, SlackGateway, slack_gateway

CHANNEL = "C0TEAM"
APPROVAL = "ap_3f9a2c1b0011223344ff"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(bot_user_id=BOT) as fake:
        yield fake


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path, slack: FakeSlack) -> AsyncIterator[SlackGateway]:
    async with slack_gateway(nats_url, tmp_path, slack) as gateway:
        yield gateway


async def deliver(gw: SlackGateway, part: messages_pb2.OutboundMessage) -> None:
    for message in gw.adapter.format(part):
        await gw.adapter.send("default", message)


async def post_notice(gw: SlackGateway, slack: FakeSlack) -> Post:
    part = messages_pb2.OutboundMessage(
        run_id=f"approval:{APPROVAL}",
        chat=messages_pb2.ChatRef(id=CHANNEL, type="group"),
        thread_id="1700000000.000100",
        text="Approval needed: `get_time` <now>",
        approval_id=APPROVAL,
    )
    await deliver(gw, part)
    [post] = slack.posts
    return post


async def click(
    gw: SlackGateway, payload: dict[str, Any], events: SlackEvents | None = None
) -> int:
    body, headers = SlackButtons.request(events or gw.events, payload)
    response = await gw.client.post(HOOK, content=body, headers=headers)
    return response.status_code


async def test_a_notice_gets_buttons_and_a_signed_click_is_published_as_its_command(
    gw: SlackGateway, slack: FakeSlack
) -> None:
    post = await post_notice(gw, slack)
    section, actions = post.blocks or []
    assert section == {"type": "section", "text": {"type": "mrkdwn", "text": post.text}}
    assert "&lt;now&gt;" in post.text  # mrkdwn, escaped as Slack wants
    approve, deny = actions["elements"]
    assert (approve["action_id"], approve["value"], approve["style"]) == (
        "sb_approve",
        "ap:3f9a2c1b0011223344ff:y",
        "primary",
    )
    assert (deny["action_id"], deny["value"]) == ("sb_deny", "ap:3f9a2c1b0011223344ff:n")
    payload = slack.buttons.click_payload(post, "U0OWNER", "sb_approve", gw.events.team_id)
    # Signed with another secret, or not signed: 401, nothing published.
    assert await click(gw, payload, SlackEvents(secret="another-secret")) == 401
    body, headers = slack.buttons.request(gw.events, payload)
    unsigned = {k: v for k, v in headers.items() if k != "x-slack-signature"}
    assert (await gw.client.post(HOOK, content=body, headers=unsigned)).status_code == 401
    assert await gw.inbound() == []

    assert await click(gw, payload) == 200
    [(msg_id, published)] = await gw.inbound()
    action_ts = payload["actions"][0]["action_ts"]
    assert msg_id == f"slack:default:{CHANNEL}:{post.ts}:click:{action_ts}"
    assert (published.sender, published.chat.id, published.chat.type) == (
        "U0OWNER",
        CHANNEL,
        "group",
    )
    assert (published.text, published.mentions_bot) == ("/approve 3f9a2c1b0011223344ff", True)
    assert (published.click.message_id, published.click.by) == (post.ts, "u0owner")
    assert published.reply_context["message_text"] == post.text
    assert published.reply_context["message_thread_ts"] == "1700000000.000100"

    # Not ours: another action id, a value that does not match its button, another type.
    other = dict(payload, actions=[{**payload["actions"][0], "action_id": "their_button"}])
    swapped = dict(payload, actions=[{**payload["actions"][0], "action_id": "sb_deny"}])
    for ignored in (other, swapped, {"type": "shortcut", "callback_id": "x"}):
        assert await click(gw, ignored) == 200
    assert len(await gw.inbound()) == 1


async def test_the_answer_updates_the_notice_or_tells_the_clicker_alone(
    gw: SlackGateway, slack: FakeSlack
) -> None:
    post = await post_notice(gw, slack)

    async def answer(decision: str, text: str, user: str) -> None:
        payload = slack.buttons.click_payload(post, user, "sb_approve", gw.events.team_id, True)
        assert await click(gw, payload) == 200
        [*_, (_, inbound)] = await gw.inbound()
        part = messages_pb2.OutboundMessage(
            chat=inbound.chat, text=text, reply_context=inbound.reply_context, click=inbound.click
        )
        part.click.decision = decision
        await deliver(gw, part)

    await answer("", "You may not decide this approval.", "U0MEMBER")
    [alone] = slack.buttons.ephemerals
    assert (alone.channel, alone.user, alone.thread_ts) == (CHANNEL, "U0MEMBER", post.thread_ts)
    assert alone.text == "You may not decide this approval."
    assert slack.buttons.updates == []

    await answer("approved", "Approved: the call to get_time (3f9a2c1b).", "U0OWNER")
    [update] = slack.buttons.updates
    assert (update.channel, update.ts) == (CHANNEL, post.ts)
    assert update.text == f"{post.text}\n\nApproved by u0owner"
    assert update.blocks == [
        {"type": "section", "text": {"type": "mrkdwn", "text": post.text}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "Approved by u0owner"}]},
    ]
    assert len(slack.buttons.ephemerals) == 1
