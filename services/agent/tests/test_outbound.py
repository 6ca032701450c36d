"""Outbound parts on a real nats-server (OUTBOUND stream) and committed replies in a real
PostgreSQL: a replayed run never publishes a part twice."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.store import create_pool, migrate
from switchboard.v1 import messages_pb2
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.outbound.publisher import OutboundPublisher, dedupe_window_s, subject_token
from switchboard_agent.runs.replies import committed_reply, latest_reply, reply_text
from switchboard_agent.runs.runner import iteration_limit_note
from switchboard_agent.sessions.store import Message, RunRecord, SessionStore
from tests.support.streams import stored as stream_messages

SUBJECTS = bus.Subjects()
STREAM = SUBJECTS.stream("OUTBOUND")
LONG = "\n\n".join(f"Paragraph {i}. " + "word " * 60 for i in range(10))  # ~3 KB: 4 parts


@pytest.fixture
async def js(nats_url: str) -> AsyncIterator[JetStreamContext]:
    nc: NATS = await nats.connect(nats_url)
    js = nc.jetstream()
    await bus.ensure_streams(js, SUBJECTS)
    yield js
    await nc.close()


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url)
    await migrate(pool, SCHEMA, MIGRATIONS)
    yield pool
    await pool.close()


def lane_item(
    channel: str = "telegram", account: str = "", message_id: str = "m-1", thread_id: str = ""
) -> messages_pb2.LaneItem:
    return messages_pb2.LaneItem(
        session_key=f"main:{channel}:42",
        agent="main",
        message=messages_pb2.InboundMessage(
            channel=channel,
            account=account,
            sender="42",
            chat=messages_pb2.ChatRef(id="chat-9", type="direct"),
            text="hi",
            message_id=message_id,
            thread_id=thread_id,
        ),
    )


async def stored(js: JetStreamContext) -> list[tuple[str, str, messages_pb2.OutboundMessage]]:
    """(subject, Nats-Msg-Id, payload) of every message in OUTBOUND, in stream order."""
    found = await stream_messages(js, STREAM, messages_pb2.OutboundMessage)
    return [(s.subject, s.msg_id, s.message) for s in found]


async def test_a_replayed_run_publishes_each_part_once(js: JetStreamContext) -> None:
    publisher = OutboundPublisher(js, SUBJECTS)
    item = lane_item()
    first = await publisher.publish("run_a", item, LONG, ["m-0", "m-1"], threaded=False)
    assert first >= 3
    assert await publisher.publish("run_a", item, LONG, ["m-0", "m-1"], threaded=False) == 0
    msgs = await stored(js)
    assert len(msgs) == first
    assert [m[1] for m in msgs] == [f"run_a:{i}" for i in range(first)]
    assert {m[0] for m in msgs} == {"sb.outbound.telegram.default"}
    for i, (_, _, part) in enumerate(msgs):
        assert (part.run_id, part.part, part.parts) == ("run_a", i, first)
        assert (part.channel, part.account, part.session_key) == (
            "telegram",
            "default",
            "main:telegram:42",
        )
        assert (part.chat.id, part.chat.type) == ("chat-9", "direct")
        assert list(part.message_ids) == ["m-0", "m-1"]
        assert (part.reply_to, part.thread_id) == ("", "")
        assert len(part.text) <= 1000
    assert msgs[0][2].text.startswith("Paragraph 0.")
    assert " ".join(m[2].text for m in msgs).split() == LONG.split()
    # another run with the same text is another reply
    assert await publisher.publish("run_b", item, LONG, ["m-2"], threaded=False) == first
    assert len(await stored(js)) == 2 * first


async def test_republish_after_delivery_is_still_dropped(js: JetStreamContext) -> None:
    """OUTBOUND is a work queue: delivered parts leave the stream, their ids stay deduped."""
    publisher = OutboundPublisher(js, SUBJECTS)
    item = lane_item(account="bot1")
    n = await publisher.publish("run_c", item, LONG, ["m-1"], threaded=False)
    sub = await bus.durable_pull(js, STREAM, "telegram", "sb.outbound.telegram.>")
    got = await sub.fetch(n, timeout=5.0)
    assert [m.headers[bus.MSG_ID] for m in got if m.headers] == [f"run_c:{i}" for i in range(n)]
    for m in got:
        await m.ack_sync()
    assert (await js.stream_info(STREAM)).state.messages == 0
    assert await publisher.publish("run_c", item, LONG, ["m-1"], threaded=False) == 0
    assert (await js.stream_info(STREAM)).state.messages == 0
    assert publisher.republish_window_s == dedupe_window_s(SUBJECTS) - 60 > 0


async def test_event_only_channels_publish_nothing(js: JetStreamContext) -> None:
    publisher = OutboundPublisher(js, SUBJECTS)
    for channel in ("api", "openai", "webchat", ""):
        assert await publisher.publish("run_d", lane_item(channel), "hello", ["m"], False) == 0
    assert await publisher.publish("run_d", lane_item(), "", ["m"], threaded=False) == 0
    assert await stored(js) == []
    custom = OutboundPublisher(js, SUBJECTS, event_only_channels={"telegram"})
    assert await custom.publish("run_e", lane_item(), "hello", ["m"], threaded=False) == 0
    assert await custom.publish("run_e", lane_item("api"), "hello", ["m"], threaded=False) == 1
    assert [(s, i) for s, i, _ in await stored(js)] == [("sb.outbound.api.default", "run_e:0")]


async def test_threading_and_subject_tokens(js: JetStreamContext) -> None:
    publisher = OutboundPublisher(js, SUBJECTS, min_chars=10, max_chars=60)
    threaded = lane_item("slack", "team.a b", message_id="1700.01")
    assert await publisher.publish("run_f", threaded, "short reply", ["1700.01"], True) == 1
    in_thread = lane_item("slack", "T1", message_id="1700.02", thread_id="1600.00")
    assert await publisher.publish("run_g", in_thread, "another", ["1700.02"], True) == 1
    plain = lane_item("slack", "T1", message_id="1700.03", thread_id="1600.00")
    assert await publisher.publish("run_h", plain, "third", ["1700.03"], False) == 1
    (s1, _, p1), (s2, _, p2), (s3, _, p3) = await stored(js)
    assert s1 == "sb.outbound.slack.team_a_b" and p1.account == "team.a b"
    assert (p1.reply_to, p1.thread_id) == ("1700.01", "1700.01")
    assert (p2.reply_to, p2.thread_id) == ("1700.02", "1600.00")
    assert (p3.reply_to, p3.thread_id) == ("", "1600.00")
    assert s2 == s3 == "sb.outbound.slack.T1"
    assert subject_token("a*b>c\td\x00ü") == "a_b_c_d_ü"


# -- committed replies ----------------------------------------------------------------------


def text(role: str, value: str) -> Message:
    return {"role": role, "content": [{"type": "text", "text": value}]}


TOOL_USE: Message = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
    ],
}
TOOL_ONLY: Message = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "t2", "name": "read", "input": {}}],
}


def results(*ids: str) -> Message:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": i, "content": "ok", "is_error": False}
            for i in ids
        ],
    }


def test_reply_text_matches_the_streamed_reply() -> None:
    # context messages of an API request come first and are not part of the reply
    context = [text("user", "earlier q"), text("assistant", "earlier a"), text("user", "q2")]
    assert (
        reply_text(
            [*context, text("user", "now"), text("assistant", "Hi!")], "completed", "end_turn"
        )
        == "Hi!"
    )
    # responses with text are joined by a blank line, those with only tool calls add nothing
    run = [
        text("user", "now"),
        TOOL_USE,
        results("t1"),
        text("user", "steered in"),
        TOOL_ONLY,
        results("t2"),
        {"role": "assistant", "content": [{"type": "text", "text": t} for t in "AB"]},
    ]
    assert reply_text(run, "completed", "end_turn") == "Let me look.\n\nAB"
    # the runner's own closing notes follow the streamed text directly (the note a real run
    # ends with is checked end to end in tests/e2e/test_agent_loop.py)
    note = iteration_limit_note(2)
    capped = [text("user", "now"), TOOL_USE, results("t1"), text("assistant", note)]
    assert reply_text(capped, "completed", "max_iterations") == "Let me look." + note
    failed = [text("user", "now"), TOOL_USE, results("t1"), text("assistant", "Sorry, x")]
    assert reply_text(failed, "error", "tool_use") == "Let me look.Sorry, x"
    assert (
        reply_text([text("user", "now"), text("assistant", "Sorry, x")], "error", "") == "Sorry, x"
    )
    interrupted = [text("user", "now"), TOOL_USE, results("t1")]
    assert reply_text(interrupted, "interrupted", "interrupted") == "Let me look."
    assert reply_text([text("user", "now")], "interrupted", "interrupted") == ""


async def commit(
    store: SessionStore, run_id: str, inbound: str, seq: int, cursor: int, messages: list[Message]
) -> None:
    record = RunRecord(run_id, "main:telegram:42", "main", inbound, seq, datetime.now(UTC))
    record.messages = messages
    await store.commit_run(record, cursor)


async def test_committed_reply(pool: asyncpg.Pool) -> None:
    store = SessionStore(pool)
    key = "main:telegram:42"
    assert await committed_reply(pool, key, "m-1") is None
    assert await latest_reply(pool, key) is None
    await commit(
        store,
        "run_1",
        "m-1",
        3,
        0,
        [text("user", "hi"), TOOL_USE, results("t1"), text("assistant", "Done.")],
    )
    await commit(store, "run_2", "m-2", 7, 3, [text("user", "again"), text("assistant", "Sure.")])
    found = await committed_reply(pool, key, "m-1")
    assert found is not None
    assert (found.run_id, found.text, found.message_ids) == (
        "run_1",
        "Let me look.\n\nDone.",
        ["m-1"],
    )
    assert (found.status, found.lane_seq) == ("completed", 3)
    assert await committed_reply(pool, key, "m-3") is None
    assert await committed_reply(pool, "main:telegram:other", "m-1") is None
    latest = await latest_reply(pool, key, within_s=540)
    assert latest is not None and (latest.run_id, latest.text) == ("run_2", "Sure.")
    # past the dedupe window a republish would not be dropped: not returned then
    await pool.execute("UPDATE agent.runs SET finished_at = now() - interval '1 hour'")
    assert await committed_reply(pool, key, "m-1", within_s=540) is None
    assert await latest_reply(pool, key, within_s=540) is None
    assert await committed_reply(pool, key, "m-1") is not None


async def test_republish_of_a_committed_run_is_dropped(
    js: JetStreamContext, pool: asyncpg.Pool
) -> None:
    """The whole replay path: publish after commit, die, rebuild from the database, republish."""
    store = SessionStore(pool)
    body = [text("user", "hi"), text("assistant", LONG)]
    await commit(store, "run_x", "m-1", 1, 0, body)
    publisher = OutboundPublisher(js, SUBJECTS)
    sent = reply_text(body, "completed", "end_turn")
    n = await publisher.publish("run_x", lane_item(), sent, ["m-1"], threaded=False)
    found = await committed_reply(pool, "main:telegram:42", "m-1", publisher.republish_window_s)
    assert found is not None and found.text == sent
    assert (
        await publisher.publish(found.run_id, lane_item(), found.text, found.message_ids, False)
        == 0
    )
    assert len(await stored(js)) == n >= 3
