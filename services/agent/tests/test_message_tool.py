"""The agent-local ``message`` tool against a real nats-server (the OUTBOUND stream): the run's
own chat, named targets (from the owner's standing only), refusals that publish nothing, and
the tool's calls going through the same gate (policy, approval rules, the group layer) as every
executor tool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from pydantic import ValidationError

from switchboard import bus
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2
from switchboard_agent.approvals.rules import ApprovalRules
from switchboard_agent.approvals.toolgate import ToolGate, ToolRules
from switchboard_agent.config import AgentSettings
from switchboard_agent.outbound.events import RunEvents
from switchboard_agent.outbound.publisher import OutboundPublisher
from switchboard_agent.runs.queueing import RunControl
from switchboard_agent.runs.toolphase import run_tools
from switchboard_agent.runs.turn import Turn
from switchboard_agent.sessions.store import RunRecord
from switchboard_agent.tools.client import CallRequest, ToolDispatcher
from switchboard_agent.tools.local import LocalContext, LocalTools
from switchboard_agent.tools.message import MessageTarget, MessageTool
from switchboard_agent.tools.policy import ToolPolicy
from tests.support.streams import stored as stream_messages

SUBJECTS = bus.Subjects()
STREAM = SUBJECTS.stream("OUTBOUND")
TARGETS = {
    "ops": MessageTarget(
        channel="slack", account="work", chat_id="C042", chat_type="group", thread_id="1700.1"
    )
}


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[NATS]:
    client: NATS = await nats.connect(nats_url)
    await bus.ensure_streams(client.jetstream(), SUBJECTS)
    yield client
    await client.close()


@pytest.fixture
def tool(nc: NATS) -> MessageTool:
    return MessageTool(OutboundPublisher(nc.jetstream(), SUBJECTS), TARGETS)


def origin(channel: str = "telegram", **fields: Any) -> messages_pb2.LaneItem:
    return messages_pb2.LaneItem(
        session_key=f"main:{channel}:42",
        agent="main",
        message=messages_pb2.InboundMessage(
            channel=channel,
            sender="42",
            chat=messages_pb2.ChatRef(id="42", type="direct"),
            text="remind me",
            message_id="m-7",
            **fields,
        ),
    )


def ctx(
    item: messages_pb2.LaneItem, run_id: str = "run_a", standing: Standing = Standing.OWNER
) -> LocalContext:
    return LocalContext(run_id, item.session_key, item.agent, item, standing)


async def stored(js: JetStreamContext) -> list[tuple[str, str, messages_pb2.OutboundMessage]]:
    """(subject, Nats-Msg-Id, part) of every message in OUTBOUND."""
    found = await stream_messages(js, STREAM, messages_pb2.OutboundMessage)
    return [(s.subject, s.msg_id, s.message) for s in found]


async def test_current_chat_gets_one_part_even_when_the_call_runs_again(
    nc: NATS, tool: MessageTool
) -> None:
    local = LocalTools([tool])
    call = CallRequest("call_1", "message", {"text": "The build is green."})
    [result] = await local.run_all(ctx(origin(thread_id="t-3")), [call])
    assert not result.is_error, result.content
    assert result.content == "sent to telegram chat 42"
    [(subject, msg_id, part)] = await stored(nc.jetstream())
    assert subject == "sb.outbound.telegram.default"
    assert msg_id == "run_a:message:call_1:0"
    assert (part.run_id, part.part, part.parts) == ("run_a:message:call_1", 0, 1)
    assert (part.channel, part.account, part.chat.id, part.chat.type) == (
        "telegram",
        "default",
        "42",
        "direct",
    )
    assert part.thread_id == "t-3" and part.text == "The build is green."
    assert part.session_key == "main:telegram:42" and list(part.message_ids) == ["m-7"]

    # A run resumed from its checkpoint runs the same call again: nothing new goes out.
    [again] = await local.run_all(ctx(origin(thread_id="t-3")), [call])
    assert again.content == "already sent to telegram chat 42"
    assert len(await stored(nc.jetstream())) == 1


async def test_a_named_target_and_a_webhook_run_delivered_to_a_chat(
    nc: NATS, tool: MessageTool
) -> None:
    local = LocalTools([tool])
    call = CallRequest("call_2", "message", {"text": "Nightly report ready", "to": "ops"})
    [result] = await local.run_all(ctx(origin("api")), [call])
    assert result.content == "sent to slack chat C042"
    hook = origin(
        "hooks",
        deliver_to=messages_pb2.DeliveryTarget(
            channel="discord", chat=messages_pb2.ChatRef(id="9001", type="group")
        ),
    )
    [current] = await local.run_all(
        ctx(hook, "run_h"), [CallRequest("c3", "message", {"text": "hi"})]
    )
    assert current.content == "sent to discord chat 9001"
    (s1, id1, p1), (s2, _, p2) = await stored(nc.jetstream())
    assert (s1, id1) == ("sb.outbound.slack.work", "run_a:message:call_2:0")
    assert (p1.chat.id, p1.chat.type, p1.thread_id, p1.account) == (
        "C042",
        "group",
        "1700.1",
        "work",
    )
    assert list(p1.message_ids) == []  # not an answer to the run's message
    assert s2 == "sb.outbound.discord.default" and p2.chat.id == "9001"


@pytest.mark.parametrize(
    ("item", "args", "error", "says"),
    [
        (origin("api"), {"text": "hi"}, "no_chat", "(api) has no chat to send to"),
        (origin("openai"), {"text": "hi", "to": "current"}, "no_chat", "Name a target"),
        (origin(), {"text": "hi", "to": "boss"}, "unknown_target", "unknown target 'boss'"),
        (origin(), {"text": "hi", "to": "ops.x"}, "unknown_target", "'current' or one of: ops"),
        (origin(), {"text": "   \n"}, "invalid_arguments", "the text is blank"),
        (origin(), {}, "invalid_arguments", "the text is blank"),
        (origin(), {"text": "hi", "media": ["https://x/a.png"]}, "media_error", "not a media"),
        (origin(), {"media": ["media:" + "a" * 64]}, "media_error", "no media service"),
        (origin(), {"text": ""}, "invalid_arguments", "(at text)"),
        (origin(), {"text": "x" * 4001}, "invalid_arguments", "is too long"),
        (origin(), {"text": 5}, "invalid_arguments", "is not of type 'string'"),
        (origin(), {"text": "hi", "cc": "ops"}, "invalid_arguments", "'cc' was unexpected"),
    ],
)
async def test_refusals_are_readable_and_send_nothing(
    nc: NATS, tool: MessageTool, item: messages_pb2.LaneItem, args: Any, error: str, says: str
) -> None:
    [result] = await LocalTools([tool]).run_all(ctx(item), [CallRequest("c", "message", args)])
    assert result.is_error and result.details["error"] == error
    assert says in result.content, result.content
    assert await stored(nc.jetstream()) == []


async def test_in_webchat_the_message_is_shown_by_the_page(nc: NATS, tool: MessageTool) -> None:
    """WebChat has no OUTBOUND chat: the tool's result carries the message for the page."""
    call = CallRequest("c", "message", {"text": "hi", "to": "current"})
    [result] = await LocalTools([tool]).run_all(ctx(origin("webchat")), [call])
    assert not result.is_error and result.content == "shown in the chat"
    assert result.details == {"to": "current", "channel": "webchat", "text": "hi", "media": []}
    assert await stored(nc.jetstream()) == []


async def test_the_longest_text_goes_as_one_part(nc: NATS, tool: MessageTool) -> None:
    text = "é" * 4000
    [result] = await LocalTools([tool]).run_all(
        ctx(origin()), [CallRequest("c", "message", {"text": text})]
    )
    assert not result.is_error
    [(_, _, part)] = await stored(nc.jetstream())
    assert part.text == text and part.parts == 1


def test_the_spec_offers_message_next_to_the_executors(tool: MessageTool) -> None:
    from switchboard.toolspec import ToolSpec

    executor = [ToolSpec("exec", "", {}), ToolSpec("message", "an old one", {})]
    offered = LocalTools([tool]).offered(executor, "main")
    assert [s.name for s in offered] == ["exec", "message"]
    assert offered[1] is tool.spec and "ops" in tool.spec.description


@pytest.mark.parametrize(
    ("targets", "says"),
    [
        ('{"current": {"channel": "telegram", "chat_id": "1"}}', "reserved"),
        ('{"x": {"channel": "webchat", "chat_id": "1"}}', "gets no chat messages"),
        ('{"a b": {"channel": "telegram", "chat_id": "1"}}', "is not a target name"),
        ('{"x": {"channel": "telegram"}}', "chat_id"),
        ('{"x": {"channel": "telegram", "chat_id": "1", "chat_type": "room"}}', "chat_type"),
        ('{"x": {"channel": "telegram", "chat_id": "1", "token": "s"}}', "token"),
    ],
)
def test_targets_are_checked_when_the_agent_starts(targets: str, says: str) -> None:
    with pytest.raises(ValidationError) as err:
        AgentSettings.from_environ({"SB_MESSAGE_TARGETS": targets})
    assert says in str(err.value)


def test_targets_load() -> None:
    settings = AgentSettings.from_environ(
        {"SB_MESSAGE_TARGETS": '{"ops": {"channel": "telegram", "chat_id": "-100"}}'}
    )
    assert settings.message_targets["ops"].destination().describe() == "telegram chat -100"


@pytest.mark.parametrize("standing", [Standing.PERSONAL, Standing.GROUP])
async def test_named_targets_only_from_the_owners_standing(
    nc: NATS, tool: MessageTool, standing: Standing
) -> None:
    local = LocalTools([tool])
    named = CallRequest("c1", "message", {"text": "leak this", "to": "ops"})
    [refused] = await local.run_all(ctx(origin(), standing=standing), [named])
    assert refused.is_error and refused.details["error"] == "not_allowed"
    assert "named targets are for the owner's own conversations only" in refused.content
    assert "Nothing was sent" in refused.content
    assert await stored(nc.jetstream()) == []
    # Its own chat, as before.
    own = CallRequest("c2", "message", {"text": "hello here"})
    [sent] = await local.run_all(ctx(origin(), standing=standing), [own])
    assert not sent.is_error and sent.content == "sent to telegram chat 42"
    # No chat of its own: no target is suggested either.
    [no_chat] = await local.run_all(ctx(origin("api"), standing=standing), [own])
    assert no_chat.details["error"] == "no_chat" and "ops" not in no_chat.content
    assert len(await stored(nc.jetstream())) == 1


# --- the gate: the same policy and approval rules as executor tools -------------------------


async def phase(
    nc: NATS,
    tool: MessageTool,
    rules: ToolRules,
    session_key: str,
    args: dict[str, Any],
    standing: Standing = Standing.OWNER,
) -> dict[str, Any]:
    """One turn calling ``message`` through run_tools; its tool_result block."""
    item = origin()
    item.session_key = session_key
    record = RunRecord("run_g", session_key, "main", "m-7", 1, datetime.now(UTC))
    events = RunEvents(nc, SUBJECTS.events("t"), "run_g", session_key, "m-7", ["m-7"])
    policy = rules.policy("main", session_key, None, standing=standing)
    control = RunControl(None, "", None, steer=False)  # type: ignore[arg-type]
    turn = Turn(record, events, control, policy, False, origin=item, standing=standing)
    gate = ToolGate(rules, None, None, 0)
    dispatcher = ToolDispatcher(nc, nc.jetstream(), SUBJECTS, 1.0)
    use = {"type": "tool_use", "id": "call_g", "name": "message", "input": args}
    message = await run_tools(gate, dispatcher, turn, [use], LocalTools([tool]))
    [block] = message["content"]
    return dict(block)


async def test_policy_and_approval_rules_apply_to_message(nc: NATS, tool: MessageTool) -> None:
    sub = await phase(nc, tool, ToolRules(), "main:telegram:42:sub:s1", {"text": "hi"})
    assert sub["is_error"] and "message is denied by the sub-agent policy" in sub["content"]

    group_policy = ToolRules(per_agent={"main": ToolPolicy(deny=("group:messaging",))})
    group = "main:telegram:group:G1"
    denied = await phase(nc, tool, group_policy, group, {"text": "hi"}, Standing.GROUP)
    assert denied["is_error"] and "denied by the agent policy" in denied["content"]
    # SB_GROUP_TOOL_PROFILE's layer, for a run of a group's standing only.
    minimal = ToolRules(group=ToolPolicy(profile="minimal"))
    layered = await phase(nc, tool, minimal, group, {"text": "hi"}, Standing.GROUP)
    assert layered["is_error"]
    assert (
        "message is not allowed by the group policy (not in profile: minimal)"
        in (layered["content"])
    )

    # An approval rule on the target: without an approval store the call is refused.
    gated = ToolRules(approvals=ApprovalRules.of(["message:to=ops"]))
    waits = await phase(nc, tool, gated, "main:telegram:42", {"text": "hi", "to": "ops"})
    assert waits["is_error"] and "requires approval (message:to=ops)" in waits["content"]
    assert await stored(nc.jetstream()) == []

    free = await phase(nc, tool, gated, "main:telegram:42", {"text": "hi"})
    assert not free["is_error"] and free["content"] == "sent to telegram chat 42"
    assert len(await stored(nc.jetstream())) == 1
