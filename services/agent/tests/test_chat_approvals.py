"""Deciding approvals from a chat (the agent's side of ``sb.approvals.decide``) against a real
PostgreSQL and nats-server: the person of a DM decides its own approvals and an owner any (the
roles the router stamps, docs/trust.md), a stranger or a group's member learns nothing and
changes nothing, ids by prefix; and the notice a waiting call posts to its chat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NATS

from switchboard import bus
from switchboard.store import create_pool, migrate
from switchboard.v1 import approvals_pb2, messages_pb2
from switchboard_agent.approvals.chat import ChatDecisions, short_id
from switchboard_agent.approvals.notice import ApprovalNotices, notice_text, render_args
from switchboard_agent.approvals.store import ApprovalRow, ApprovalStore, ApprovalWaiter
from switchboard_agent.config import AgentSettings
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.outbound.publisher import OutboundPublisher
from switchboard_agent.tools.client import CallRequest

SUBJECTS = bus.Subjects()
OWNER = "main:telegram:4242"  # the DM of the person telegram:4242 (role user)


@dataclass
class Env:
    nc: NATS
    store: ApprovalStore
    decisions: ChatDecisions


@pytest.fixture
async def env(nats_url: str, database_url: str) -> AsyncIterator[Env]:
    nc: NATS = await nats.connect(nats_url)
    await bus.ensure_streams(nc.jetstream(), SUBJECTS)
    pool: asyncpg.Pool = await create_pool(database_url, max_size=2)
    await migrate(pool, SCHEMA, MIGRATIONS)
    store = ApprovalStore(pool)
    decisions = ChatDecisions(store, ApprovalWaiter(nc, SUBJECTS, store))
    await decisions.subscribe(nc, SUBJECTS)
    try:
        yield Env(nc, store, decisions)
    finally:
        await pool.close()
        await nc.close()


async def waiting(store: ApprovalStore, session_key: str = OWNER, call: str = "c1") -> ApprovalRow:
    return await store.request(
        run_id="run_1",
        session_key=session_key,
        agent="main",
        call_id=call,
        tool="exec",
        args={"command": "rm -rf build"},
        rule="exec:command=rm *",
    )


async def ask(
    nc: NATS,
    typed: str,
    sender: str,
    session_key: str,
    approve: bool = True,
    reason: str = "",
    role: str = "user",
) -> approvals_pb2.ChatDecisionResult:
    """The request as the router sends it, over NATS (``role``: its stamp)."""
    request = approvals_pb2.ChatDecision(
        approval_id=typed,
        approve=approve,
        reason=reason,
        sender=sender,
        session_key=session_key,
        role=role,
    )
    reply = await nc.request(SUBJECTS.approvals_decide(), request.SerializeToString(), timeout=10)
    return approvals_pb2.ChatDecisionResult.FromString(reply.data)


async def test_the_dms_person_decides_by_short_id_and_the_run_is_woken(env: Env) -> None:
    row = await waiting(env.store)
    woken = asyncio.Event()

    async def on_wake(_: object) -> None:
        woken.set()

    await env.nc.subscribe(SUBJECTS.approvals("run_1"), cb=on_wake)
    short = await short_id(env.store.pool, row.approval_id)
    assert len(short) == 8 and row.approval_id == f"ap_{short}" + row.approval_id[11:]

    answer = await ask(env.nc, short.upper(), "telegram:4242", OWNER, reason="go ahead")
    assert (answer.outcome, answer.status, answer.tool) == ("decided", "approved", "exec")
    assert answer.approval_id == row.approval_id
    await asyncio.wait_for(woken.wait(), 10)
    decided = await env.store.get(row.approval_id)
    assert decided is not None
    assert (decided.status, decided.decided_by, decided.reason) == (
        "approved",
        "telegram:4242",
        "go ahead",
    )

    again = await ask(env.nc, row.approval_id, "telegram:4242", OWNER, approve=False)
    assert (again.outcome, again.status) == ("already_decided", "approved")


async def test_a_stranger_is_refused_and_learns_nothing(env: Env) -> None:
    row = await waiting(env.store)
    for sender, key, role in [
        ("telegram:9999", "main:telegram:9999", "user"),
        ("telegram:9999", "main:telegram:group:4242", "member"),  # another chat's session
        ("telegram:9999", "main:telegram:group:4242", "user"),  # a user's role in a group
        ("slack:4242", "main:slack:4242", "user"),  # the same id on another channel
        ("telegram:4242", "", "user"),  # no session given
        ("telegram:4242", OWNER, ""),  # no role stamped: the least
        ("telegram:4242", OWNER, "member"),
        ("telegram:4242", OWNER, "hook"),
    ]:
        answer = await ask(env.nc, row.approval_id[3:11], sender, key, role=role)
        assert answer == approvals_pb2.ChatDecisionResult(outcome="not_allowed"), (sender, role)
    current = await env.store.get(row.approval_id)
    assert current is not None and current.status == "awaiting_approval"
    # Decided meanwhile: a stranger is still told only that it may not decide.
    await env.store.decide(row.approval_id, "denied", "api")
    late = await ask(env.nc, row.approval_id, "telegram:9999", "main:telegram:9999")
    assert late == approvals_pb2.ChatDecisionResult(outcome="not_allowed")


async def test_an_owner_decides_any_session_and_a_parent_its_sub_agents(env: Env) -> None:
    other = await waiting(env.store, "main:discord:77", "c1")
    answer = await ask(
        env.nc, other.approval_id, "slack:UOPS", "main:slack:UOPS", approve=False, role="owner"
    )
    assert (answer.outcome, answer.status) == ("decided", "denied")
    decided = await env.store.get(other.approval_id)
    assert decided is not None and decided.decided_by == "slack:UOPS"
    child = await waiting(env.store, f"{OWNER}:sub:s1", "c2")
    answer = await ask(env.nc, child.approval_id, "telegram:4242", OWNER)
    assert (answer.outcome, answer.status) == ("decided", "approved")
    # The child's own key is no parent of the parent.
    parent = await waiting(env.store, OWNER, "c3")
    refused = await ask(env.nc, parent.approval_id, "telegram:4242", f"{OWNER}:sub:s1")
    assert refused.outcome == "not_allowed"


async def test_unknown_invalid_and_ambiguous_ids(env: Env) -> None:
    pool = env.store.pool
    assert (await ask(env.nc, "ap_0123456789", "telegram:4242", OWNER)).outcome == "not_found"
    for typed in ("", "abc", "ap_", "zzzzzzzz", "ap_12345%", "12345_"):
        assert (await ask(env.nc, typed, "telegram:4242", OWNER)).outcome == "invalid", typed
    assert (await ask(env.nc, "ap_abcdef12", "", OWNER)).outcome == "invalid"
    # Two approvals whose ids share their first ten hex digits.
    a = await waiting(env.store, OWNER, "c1")
    b = await waiting(env.store, OWNER, "c2")
    await pool.execute(
        "UPDATE agent.tool_calls SET approval_id = $2 WHERE approval_id = $1",
        a.approval_id,
        "ap_abcdef12340000000000",
    )
    await pool.execute(
        "UPDATE agent.tool_calls SET approval_id = $2 WHERE approval_id = $1",
        b.approval_id,
        "ap_abcdef12341111111111",
    )
    assert await short_id(pool, "ap_abcdef12340000000000") == "abcdef12340"
    assert (await ask(env.nc, "abcdef12", "telegram:4242", OWNER)).outcome == "ambiguous"
    answer = await ask(env.nc, "abcdef12341", "telegram:4242", OWNER)
    assert (answer.outcome, answer.approval_id) == ("decided", "ap_abcdef12341111111111")


async def test_a_payload_that_is_no_request_is_answered_invalid(env: Env) -> None:
    reply = await env.nc.request(SUBJECTS.approvals_decide(), b"\xff\xff", timeout=10)
    assert approvals_pb2.ChatDecisionResult.FromString(reply.data).outcome == "invalid"


# --- the notice ----------------------------------------------------------------------------


def lane_item(channel: str) -> messages_pb2.LaneItem:
    return messages_pb2.LaneItem(
        session_key=OWNER,
        agent="main",
        message=messages_pb2.InboundMessage(
            channel=channel,
            sender="4242",
            chat=messages_pb2.ChatRef(id="4242", type="direct"),
            message_id="m-1",
            thread_id="th",
        ),
    )


async def test_a_waiting_call_is_announced_once_to_a_chat(env: Env) -> None:
    js = env.nc.jetstream()
    notices = ApprovalNotices(OutboundPublisher(js, SUBJECTS), env.store)
    row = await waiting(env.store)
    call = CallRequest("c1", "exec", row.args)
    await notices(lane_item("telegram"), call, row)
    await notices(lane_item("telegram"), call, row)  # a resumed run waits again
    await notices(lane_item("webchat"), call, row)  # WebChat sees the approval event instead
    info = await js.stream_info("OUTBOUND")
    assert info.state.messages == 1
    raw = await js.get_msg("OUTBOUND", info.state.first_seq)
    part = messages_pb2.OutboundMessage.FromString(raw.data or b"")
    assert (raw.headers or {})[bus.MSG_ID] == f"approval:{row.approval_id}:0"
    assert raw.subject == "sb.outbound.telegram.default"
    assert (part.chat.id, part.thread_id, part.session_key) == ("4242", "th", OWNER)
    short = row.approval_id[3:11]
    assert f"/approve {short}" in part.text and f"/deny {short}" in part.text
    assert "`exec`" in part.text and "`exec:command=rm *`" in part.text
    assert '{"command": "rm -rf build"}' in part.text


def test_the_arguments_are_shown_safely() -> None:
    shown = render_args({"command": "echo \u202eevil\u200b", "n": 1})
    assert shown == '{"command": "echo \\u202eevil\\u200b", "n": 1}'
    long = render_args({"content": "x" * 1000})
    assert len(long) < 360 and long.endswith("(715 more characters)")
    row = ApprovalRow(
        approval_id="ap_1",
        run_id="r",
        session_key=OWNER,
        agent="main",
        call_id="c",
        tool="write",
        args={"path": "a`b"},
        rule="write:path=`*`",
        status="awaiting_approval",
        decided_by="",
        reason="",
        requested_at=datetime.now(UTC),
        decided_at=None,
        started_at=None,
        finished_at=None,
    )
    text = notice_text(row, "abcd1234")
    assert "(rule `write:path='*'`)" in text
    assert "\n```\n" in text and text.count("```") == 2


async def test_in_a_group_only_an_owner_decides_and_a_member_learns_nothing(env: Env) -> None:
    group = "main:telegram:group:-100"
    row = await waiting(env.store, group)
    for typed in (row.approval_id, "ap_0123456789"):  # a real one and one that does not exist
        for role in ("member", "user", ""):
            answer = await ask(env.nc, typed, "telegram:555", group, role=role)
            assert answer == approvals_pb2.ChatDecisionResult(outcome="not_allowed"), role
    current = await env.store.get(row.approval_id)
    assert current is not None and current.status == "awaiting_approval"
    # The owner, speaking in that group, may.
    answer = await ask(env.nc, row.approval_id, "telegram:1", group, role="owner")
    assert (answer.outcome, answer.status) == ("decided", "approved")
    decided = await env.store.get(row.approval_id)
    assert decided is not None and decided.decided_by == "telegram:1"


def test_the_agent_settings_no_longer_hold_approvers() -> None:
    """Who decides is the router's stamp (SB_APPROVERS folds into its owners): an agent
    started with the old setting ignores it rather than failing."""
    settings = AgentSettings.from_environ({"SB_APPROVERS": '["telegram:1"]'})
    assert not hasattr(settings, "approvers")
