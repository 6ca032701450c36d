"""The role stamp (``InboundMessage.role``, docs/trust.md), against a real nats-server with the
router in-process: what reaches the lane carries the role the router decided for every kind of
channel and sender, never the publisher's; chat commands carry the same role to the agents."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.v1 import approvals_pb2, messages_pb2, router_pb2, sessions_pb2
from tests.support.streams import stored as stream_messages

from .router_harness import dm, group, route, router

SUBJECTS = bus.Subjects()


async def stamped(js: JetStreamContext) -> dict[str, tuple[str, str]]:
    """message id -> (role, session key) of every lane item."""
    found = await stream_messages(js, SUBJECTS.stream("LANES"), messages_pb2.LaneItem)
    return {
        s.message.message.message_id: (s.message.message.role, s.message.session_key) for s in found
    }


def forged(
    message: messages_pb2.InboundMessage, role: str = "owner"
) -> messages_pb2.InboundMessage:
    """``message`` as a publisher that claims a role would send it."""
    message.role = role
    return message


@pytest.mark.parametrize(
    ("channel", "role"),
    [
        ("api", "owner"),
        ("openai", "owner"),
        ("webchat", "owner"),
        ("a2a", "owner"),
        ("hooks", "hook"),
        ("cron", "cron"),
    ],
)
async def test_first_party_channels_get_their_channels_role(
    nats_url: str, channel: str, role: str
) -> None:
    async with router(nats_url) as r:
        await route(r.js, forged(dm(channel, "x", "m1"), "subagent"))
        assert await stamped(r.js) == {"m1": (role, f"main:{channel}:x")}


async def test_chat_senders_get_owner_user_or_member(nats_url: str) -> None:
    env = {
        "SB_DM_POLICY": "open",
        "SB_TELEGRAM_GROUPS": '["-100"]',
        "SB_OWNERS": '["telegram:1"]',
        "SB_APPROVERS": '["slack:U7"]',
        "SB_SLACK_GROUPS": '["C9"]',
    }
    async with router(nats_url, **env) as r:
        await route(
            r.js,
            dm("telegram", "1", "owner-dm"),
            forged(dm("telegram", "2", "user-dm")),
            group("telegram", "owner-group", True, sender="1", chat="-100"),
            forged(group("telegram", "member-group", True, sender="2", chat="-100")),
            group("slack", "approver-group", True, sender="U7"),
            forged(dm("slack", "1", "other-channel")),  # telegram's owner is nobody on Slack
        )
        assert await stamped(r.js) == {
            "owner-dm": ("owner", "main:telegram:1"),
            "user-dm": ("user", "main:telegram:2"),
            # an owner in a group: role owner, still the group's session (standing group)
            "owner-group": ("owner", "main:telegram:group:-100"),
            "member-group": ("member", "main:telegram:group:-100"),
            "approver-group": ("owner", "main:slack:group:C9"),
            "other-channel": ("user", "main:slack:1"),
        }


async def test_pairing_as_an_owner_makes_an_owner_everywhere_on_that_channel(
    nats_url: str,
) -> None:
    async with router(nats_url, SB_GROUP_POLICY="open") as r:  # DM policy: pairing
        await route(r.js, dm("telegram", "5", "ask-5"), dm("telegram", "6", "ask-6"))
        requests = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        codes = {q.sender: q.code for q in requests}
        owner = await r.admin.Approve(
            router_pb2.PairingDecision(channel="telegram", code=codes["5"], owner=True)
        )
        user = await r.admin.Approve(
            router_pb2.PairingDecision(channel="telegram", code=codes["6"])
        )
        assert (owner.role, user.role) == ("owner", "user")
        listed = (await r.admin.ListPaired(router_pb2.ListPairingRequest())).senders
        assert {(s.sender, s.role) for s in listed} == {("5", "owner"), ("6", "user")}
        await route(
            r.js,
            dm("telegram", "5", "owner-dm"),
            forged(dm("telegram", "6", "user-dm")),
            group("telegram", "owner-group", True, sender="5", chat="-1"),
            forged(group("telegram", "member-group", True, sender="6", chat="-1")),
        )
        roles = {k: v[0] for k, v in (await stamped(r.js)).items()}
        assert roles == {
            "owner-dm": "owner",
            "user-dm": "user",
            "owner-group": "owner",
            "member-group": "member",
        }


@pytest.fixture
async def agent_nc(nats_url: str) -> AsyncIterator[NATS]:
    nc: NATS = await nats.connect(nats_url)
    yield nc
    await nc.close()


async def test_chat_commands_carry_the_senders_role(nats_url: str, agent_nc: NATS) -> None:
    decisions: list[approvals_pb2.ChatDecision] = []
    commands: list[sessions_pb2.SessionCommand] = []

    async def decide(msg: Msg) -> None:
        decisions.append(approvals_pb2.ChatDecision.FromString(msg.data))
        await msg.respond(
            approvals_pb2.ChatDecisionResult(outcome="not_allowed").SerializeToString()
        )

    async def command(msg: Msg) -> None:
        commands.append(sessions_pb2.SessionCommand.FromString(msg.data))
        answer = sessions_pb2.SessionCommandResult(outcome="not_allowed", text="no")
        await msg.respond(answer.SerializeToString())

    await agent_nc.subscribe(SUBJECTS.approvals_decide(), cb=decide)
    await agent_nc.subscribe(SUBJECTS.sessions_command(), cb=command)
    await agent_nc.flush()
    env = {"SB_DM_POLICY": "open", "SB_SLACK_GROUPS": '["C9"]', "SB_OWNERS": '["slack:BOSS"]'}
    sent = [
        ("U1", "direct", "/approve abcdef12"),
        ("U1", "group", "/approve abcdef12"),
        ("BOSS", "group", "/deny abcdef12"),
        ("U1", "direct", "/status"),
        ("U1", "group", "/new"),
        ("BOSS", "group", "/stop"),
    ]
    async with router(nats_url, **env) as r:
        for i, (sender, kind, text) in enumerate(sent):
            message = (
                dm("slack", sender, f"c{i}")
                if kind == "direct"
                else group("slack", f"c{i}", True, sender=sender)
            )
            message.text = text
            assert await route(r.js, forged(message)) == set()
    assert [(d.sender, d.role, d.session_key) for d in decisions] == [
        ("slack:U1", "user", "main:slack:U1"),
        ("slack:U1", "member", "main:slack:group:C9"),
        ("slack:BOSS", "owner", "main:slack:group:C9"),
    ]
    assert [(c.command, c.role) for c in commands] == [
        ("status", "user"),
        ("new", "member"),
        ("stop", "owner"),
    ]
