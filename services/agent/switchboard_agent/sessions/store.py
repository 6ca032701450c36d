"""Sessions, runs and transcripts in PostgreSQL. A run's transcript, its run row and the lane
cursor are written in one transaction, so a replayed lane item is recognised and skipped."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from switchboard.sessions import SUBAGENT_MARKER

from ..usage.store import CallUsage
from .compactions import summary_message

Message = dict[str, Any]


@dataclass
class RunRecord:
    run_id: str
    session_key: str
    agent: str
    inbound_id: str
    lane_seq: int
    started_at: datetime
    status: str = "completed"
    stop_reason: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    iterations: int = 0
    error: str = ""
    messages: list[Message] = field(default_factory=list)
    checkpointed: bool = False  # a checkpoint was saved (awaiting approval): drop it on commit
    epoch: int = 0  # the transcript epoch the run read: its messages count only in it


@dataclass(frozen=True)
class StoredMessage:
    role: str
    content: list[dict[str, Any]]
    run_id: str
    created_at: datetime


@dataclass(frozen=True)
class SessionRow:
    session_key: str
    agent: str
    updated_at: datetime
    message_count: int


@dataclass(frozen=True)
class RunStart:
    """:meth:`SessionStore.run_start`: the run state and the transcript, read together."""

    done: bool  # the inbound message was answered already (a replayed lane item)
    checkpoint: tuple[str, dict[str, Any]] | None  # (run id, state) of a run awaiting approval
    epoch: int
    history: list[Message]


class CursorMoved(Exception):
    """Another owner advanced the lane cursor first: this run must not be committed."""


@dataclass(frozen=True)
class LaneState:
    cursor: int
    queue_mode: str
    tool_policy: dict[str, Any] | None = None
    model: str = ""  # the session's own model ("" : the agent's)
    standing: str = ""  # the standing its own person gave it ("" : unknown; sessions/standing.py)


def like_prefix(text: str) -> str:
    """A LIKE pattern (``ESCAPE '\\'``) matching every string that starts with ``text``."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


class SessionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def lane_state(self, session_key: str) -> LaneState:
        row = await self.pool.fetchrow(
            "SELECT lane_cursor, queue_mode, tool_policy, model, standing FROM agent.sessions"
            " WHERE session_key = $1",
            session_key,
        )
        if row is None:
            return LaneState(0, "")
        policy = json.loads(row["tool_policy"]) if row["tool_policy"] else None
        return LaneState(
            int(row["lane_cursor"]), row["queue_mode"], policy, row["model"], row["standing"]
        )

    async def remember_standing(self, session_key: str, agent: str, standing: str) -> None:
        """Store the standing the session's own person gave it (only called when it changed,
        so the steady state costs nothing). Not activity: ``updated_at`` stays."""
        await self.pool.execute(
            "INSERT INTO agent.sessions (session_key, agent, standing) VALUES ($1, $2, $3)"
            " ON CONFLICT (session_key) DO UPDATE SET standing = EXCLUDED.standing",
            session_key,
            agent,
            standing,
        )

    async def set_tool_policy(
        self, session_key: str, agent: str, policy: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Set (or with ``None`` clear) the session's tool policy override."""
        value = await self.pool.fetchval(
            "INSERT INTO agent.sessions (session_key, agent, tool_policy) VALUES ($1, $2, $3)"
            " ON CONFLICT (session_key) DO UPDATE SET tool_policy = EXCLUDED.tool_policy,"
            " updated_at = now() RETURNING tool_policy",
            session_key,
            agent,
            json.dumps(policy) if policy is not None else None,
        )
        return json.loads(value) if value else None

    async def set_queue_mode(self, session_key: str, agent: str, mode: str) -> str:
        value = await self.pool.fetchval(
            "INSERT INTO agent.sessions (session_key, agent, queue_mode) VALUES ($1, $2, $3)"
            " ON CONFLICT (session_key) DO UPDATE SET queue_mode = EXCLUDED.queue_mode,"
            " updated_at = now() RETURNING queue_mode",
            session_key,
            agent,
            mode,
        )
        return str(value)

    async def run_state(
        self, session_key: str, inbound_id: str
    ) -> tuple[bool, tuple[str, dict[str, Any]] | None]:
        """Was ``inbound_id`` answered already, and is there a checkpoint (run id, state) of a
        run for it waiting for an approval? One round trip: it is asked before every run."""
        row = await self.pool.fetchrow(
            "SELECT EXISTS (SELECT 1 FROM agent.runs WHERE session_key = $1 AND inbound_id = $2)"
            " AS done, c.run_id, c.state FROM (SELECT 1) AS one"
            " LEFT JOIN agent.run_checkpoints c ON c.session_key = $1 AND c.inbound_id = $2",
            session_key,
            inbound_id,
        )
        checkpoint = (row["run_id"], json.loads(row["state"])) if row["run_id"] else None
        return bool(row["done"]), checkpoint

    async def run_start(self, session_key: str, inbound_id: str) -> RunStart:
        """What a run reads before it starts, in one round trip instead of two: whether
        ``inbound_id`` was answered, its checkpoint, and the transcript with its epoch (as
        :meth:`run_state` and :meth:`transcript_at`; the transcript of a replayed item is read
        for nothing, which is rare). The lane owner is the transcript's only writer while it
        holds the lease, so reading it before the run's start event changes nothing."""
        rows = await self.pool.fetch(_RUN_START, session_key, inbound_id)
        first = rows[0]  # the base row always exists (LEFT JOINs)
        state = first["ck_state"]
        checkpoint = (first["ck_run"], json.loads(state)) if first["ck_run"] else None
        summary = [summary_message(first["summary"])] if first["summary"] else []
        history = [
            {"role": r["role"], "content": json.loads(r["content"])} for r in rows if r["role"]
        ]
        return RunStart(bool(first["done"]), checkpoint, int(first["epoch"]), summary + history)

    async def transcript(self, session_key: str) -> list[Message]:
        return (await self.transcript_at(session_key))[1]

    async def transcript_at(self, session_key: str) -> tuple[int, list[Message]]:
        """The session's transcript epoch and its messages, read together (one statement).
        A compacted transcript starts with its latest summary, then the messages after it
        (sessions/compactions.py)."""
        rows = await self.pool.fetch(
            "SELECT e.epoch, c.summary, m.role, m.content FROM"
            " (SELECT coalesce((SELECT epoch FROM agent.sessions WHERE session_key = $1), 0)"
            " AS epoch) AS e LEFT JOIN LATERAL (SELECT summary, through_id"
            " FROM agent.compactions WHERE session_key = $1 AND epoch = e.epoch"
            " ORDER BY through_id DESC LIMIT 1) AS c ON true LEFT JOIN agent.messages m"
            " ON m.session_key = $1 AND m.epoch = e.epoch AND m.id > coalesce(c.through_id, 0)"
            " ORDER BY m.id",
            session_key,
        )
        epoch = int(rows[0]["epoch"]) if rows else 0
        summary = [summary_message(rows[0]["summary"])] if rows and rows[0]["summary"] else []
        return epoch, summary + [
            {"role": r["role"], "content": json.loads(r["content"])} for r in rows if r["role"]
        ]

    async def commit_run(
        self, run: RunRecord, expected_cursor: int, usage: Sequence[CallUsage] = ()
    ) -> None:
        """Store the run and its transcript and move the cursor to ``run.lane_seq``, atomically,
        only if the cursor is still ``expected_cursor`` (else :class:`CursorMoved`).

        One statement, so one round trip: the cursor move is a data-modifying CTE and the
        inserts only happen when it moved a row (a statement is atomic by itself). ``usage``:
        the run's model calls held for this statement (usage/writer.py), written whether or not
        the cursor moved (the calls were made either way)."""
        moved = await self.pool.fetchval(
            _COMMIT,
            run.session_key,
            run.agent,
            run.lane_seq,
            expected_cursor,
            run.run_id,
            run.inbound_id,
            run.status,
            run.stop_reason,
            run.model,
            run.input_tokens,
            run.output_tokens,
            run.iterations,
            run.error,
            run.started_at,
            [m["role"] for m in run.messages],
            [json.dumps(m["content"]) for m in run.messages],
            run.checkpointed,
            run.epoch,
            [u.run_id for u in usage],
            [u.session_key for u in usage],
            [u.agent for u in usage],
            [u.model for u in usage],
            [u.input_tokens for u in usage],
            [u.output_tokens for u in usage],
            [u.cost_usd for u in usage],
        )
        if not moved:
            raise CursorMoved(run.session_key)

    async def advance_cursor(self, session_key: str, agent: str, seq: int, expected: int) -> None:
        """Move the cursor over items that need no run (e.g. a replayed message)."""
        async with self.pool.acquire() as conn:  # one statement: atomic by itself
            await _move_cursor(conn, session_key, agent, seq, expected)

    async def history(self, session_key: str, limit: int = 0) -> list[StoredMessage]:
        query = (
            "SELECT m.role, m.content, m.run_id, m.created_at FROM agent.messages m"
            " JOIN agent.sessions s ON s.session_key = m.session_key AND s.epoch = m.epoch"
            " WHERE m.session_key = $1 ORDER BY m.id"
        )
        rows = await self.pool.fetch(query, session_key)
        if limit > 0:
            rows = rows[-limit:]
        return [
            StoredMessage(r["role"], json.loads(r["content"]), r["run_id"], r["created_at"])
            for r in rows
        ]

    async def list_sessions(
        self, agent: str = "", limit: int = 100, *, within: str = "", tree: bool = False
    ) -> list[SessionRow]:
        """The sessions of ``agent`` ("" : every agent's), newest first. ``within``: only that
        session, and with ``tree`` its sub-agents (keys under ``<within>:sub:``) too (the
        session tools' visibility, filtered here rather than after fetching everything)."""
        rows = await self.pool.fetch(
            "SELECT s.session_key, s.agent, s.updated_at,"
            " (SELECT count(*) FROM agent.messages m WHERE m.session_key = s.session_key"
            " AND m.epoch = s.epoch) AS n"
            " FROM agent.sessions s WHERE ($1 = '' OR s.agent = $1)"
            " AND ($3 = '' OR s.session_key = $3"
            " OR ($4::bool AND s.session_key LIKE $5 ESCAPE '\\'))"
            # a deleted session is listed again once it has a transcript of its own
            " AND (s.deleted_at IS NULL OR EXISTS (SELECT 1 FROM agent.messages m"
            " WHERE m.session_key = s.session_key AND m.epoch = s.epoch))"
            " ORDER BY s.updated_at DESC LIMIT $2",
            agent,
            limit,
            within,
            tree,
            like_prefix(within + SUBAGENT_MARKER),
        )
        return [SessionRow(r["session_key"], r["agent"], r["updated_at"], r["n"]) for r in rows]


# run_state's and transcript_at's statements as one: the base row (epoch, done, checkpoint)
# joined to the transcript's rows; the checkpoint columns repeat on each row, and are only set
# for a run that waited for an approval.
_RUN_START = (
    "SELECT e.epoch, e.done, e.ck_run, e.ck_state, c.summary, m.role, m.content FROM"
    " (SELECT coalesce((SELECT epoch FROM agent.sessions WHERE session_key = $1), 0) AS epoch,"
    " EXISTS (SELECT 1 FROM agent.runs WHERE session_key = $1 AND inbound_id = $2) AS done,"
    " ck.run_id AS ck_run, ck.state AS ck_state FROM (SELECT 1) AS one"
    " LEFT JOIN agent.run_checkpoints ck ON ck.session_key = $1 AND ck.inbound_id = $2) AS e"
    " LEFT JOIN LATERAL (SELECT summary, through_id"
    " FROM agent.compactions WHERE session_key = $1 AND epoch = e.epoch"
    " ORDER BY through_id DESC LIMIT 1) AS c ON true LEFT JOIN agent.messages m"
    " ON m.session_key = $1 AND m.epoch = e.epoch AND m.id > coalesce(c.through_id, 0)"
    " ORDER BY m.id"
)
_MOVE = (
    "INSERT INTO agent.sessions AS s (session_key, agent, lane_cursor)"
    " SELECT $1, $2, $3::bigint WHERE $4::bigint = 0"
    " OR EXISTS (SELECT 1 FROM agent.sessions WHERE session_key = $1)"
    " ON CONFLICT (session_key) DO UPDATE SET lane_cursor = EXCLUDED.lane_cursor,"
    " updated_at = now() WHERE s.lane_cursor = $4 RETURNING s.epoch"
)
_COMMIT = (
    f"WITH moved AS ({_MOVE}),"
    " run AS (INSERT INTO agent.runs (run_id, session_key, inbound_id, lane_seq, status,"
    " stop_reason, model, input_tokens, output_tokens, iterations, error, started_at)"
    " SELECT $5::text, $1, $6::text, $3, $7::text, $8::text, $9::text, $10::bigint,"
    " $11::bigint, $12::int, $13::text, $14::timestamptz"
    " WHERE EXISTS (SELECT 1 FROM moved) RETURNING 1),"
    # The messages join the transcript only if it was not reset since the run read it: the
    # epoch RETURNING gives is the row's latest (a concurrent reset is waited for).
    " msgs AS (INSERT INTO agent.messages (session_key, run_id, role, content, epoch)"
    " SELECT $1, $5::text, t.role, t.content::jsonb, $18::int"
    " FROM unnest($15::text[], $16::text[]) WITH ORDINALITY AS t(role, content, n)"
    " WHERE EXISTS (SELECT 1 FROM moved WHERE moved.epoch = $18::int) ORDER BY t.n RETURNING 1),"
    " dropped AS (DELETE FROM agent.run_checkpoints WHERE $17::bool"
    " AND session_key = $1 AND inbound_id = $6 AND EXISTS (SELECT 1 FROM moved)),"
    # The run's held usage rows (usage/writer.py), in call order, moved or not.
    " used AS (INSERT INTO agent.usage (run_id, session_key, agent, model, input_tokens,"
    " output_tokens, cost_usd) SELECT u.r, u.s, u.a, u.m, u.i, u.o, u.c FROM unnest($19::text[],"
    " $20::text[], $21::text[], $22::text[], $23::bigint[], $24::bigint[], $25::float8[])"
    " WITH ORDINALITY AS u(r, s, a, m, i, o, c, n) ORDER BY u.n RETURNING 1)"
    " SELECT count(*) FROM moved"
)


async def _move_cursor(
    conn: asyncpg.Connection, session_key: str, agent: str, seq: int, expected: int
) -> None:
    """One round trip: move the cursor to ``seq`` only if it still is ``expected``; a session
    without a row yet counts as cursor 0 (and gets its row)."""
    moved = await conn.fetchval(
        _MOVE,
        session_key,
        agent,
        seq,
        expected,
    )
    if moved is None:
        raise CursorMoved(session_key)
