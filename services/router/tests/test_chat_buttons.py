"""A click on an approval notice's button (``InboundMessage.click``), against a real nats-server
and the router in-process: it is decided exactly as the command it stands for, typed by the
clicker (the same ``ChatDecision``, the role security stamped), and the answer carries the click
back with the decision it made; a click security refuses asks the agents nothing and is told
that its sender may not decide; a typed command's answer carries no click."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS

from switchboard.v1 import approvals_pb2, messages_pb2

from .router_harness import group, route, router
from .test_chat_commands import replies, stand_in


@pytest.fixture
async def agent_nc(nats_url: str) -> AsyncIterator[NATS]:
    nc: NATS = await nats.connect(nats_url)
    yield nc
    await nc.close()


def click(text: str, sender: str, message_id: str) -> messages_pb2.InboundMessage:
    msg = group("telegram", message_id, mentions_bot=True, sender=sender, chat="-100777")
    msg.text = text
    msg.click.CopyFrom(messages_pb2.ButtonClick(message_id="1001", by="Ada Lovelace"))
    msg.reply_context["callback_query_id"] = "q-" + message_id
    return msg


def refusing(request: approvals_pb2.ChatDecision) -> approvals_pb2.ChatDecisionResult:
    return approvals_pb2.ChatDecisionResult(outcome="not_allowed")


async def test_a_click_is_decided_as_the_typed_command_and_answered_with_its_decision(
    nats_url: str, agent_nc: NATS
) -> None:
    agent = await stand_in(agent_nc)
    env = {"SB_TELEGRAM_GROUPS": '["-100777"]', "SB_OWNERS": '["telegram:42"]'}
    async with router(nats_url, **env) as r:
        assert await route(r.js, click("/approve 3f9a2c1b00", "42", "k1")) == set()
        [request] = agent.requests
        assert (request.approval_id, request.approve, request.role) == ("3f9a2c1b00", True, "owner")
        assert (request.sender, request.session_key) == (
            "telegram:42",
            "main:telegram:group:-100777",
        )
        typed = group("telegram", "k2", mentions_bot=True, sender="42", chat="-100777")
        typed.text = "/deny 3f9a2c1b00"
        assert await route(r.js, typed) == set()
        (_, answer), (_, typed_answer) = await replies(r.js)
        assert answer.text == "Approved: the call to exec (3f9a2c1b00)."
        assert answer.HasField("click")
        assert (answer.click.message_id, answer.click.by) == ("1001", "Ada Lovelace")
        assert answer.click.decision == "approved"
        assert answer.reply_context["callback_query_id"] == "q-k1"
        assert not typed_answer.HasField("click")  # a typed command's answer is a message


async def test_a_click_that_decides_nothing_carries_no_decision(
    nats_url: str, agent_nc: NATS
) -> None:
    agent = await stand_in(agent_nc, refusing)
    async with router(nats_url, SB_TELEGRAM_GROUPS='["-100777"]') as r:
        assert await route(r.js, click("/approve 3f9a2c1b00", "77", "k3")) == set()
        assert agent.requests[0].role == "member"
        [(_, answer)] = await replies(r.js)
        assert answer.text == "You may not decide this approval."
        assert answer.HasField("click") and answer.click.decision == ""


async def test_a_click_security_refuses_is_told_so_and_asks_nothing(
    nats_url: str, agent_nc: NATS
) -> None:
    agent = await stand_in(agent_nc)
    env = {
        "SB_TELEGRAM_GROUPS": '["-100777"]',
        "SB_TELEGRAM_GROUP_ALLOW_FROM": '["42"]',  # 77 is not heard in the group
    }
    async with router(nats_url, **env) as r:
        assert await route(r.js, click("/approve 3f9a2c1b00", "77", "k4")) == set()
        # An ordinary message refused the same way gets no answer at all.
        chatter = group("telegram", "k5", mentions_bot=True, sender="77", chat="-100777")
        assert await route(r.js, chatter) == set()
        assert agent.requests == []
        [(msg_id, answer)] = await replies(r.js)
        assert msg_id == "command:telegram:default:k4:0"
        assert answer.text == "You may not decide this approval."
        assert answer.click.decision == "" and answer.click.message_id == "1001"
