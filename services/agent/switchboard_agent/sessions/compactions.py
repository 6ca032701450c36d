"""Compactions in PostgreSQL (``agent.compactions``, migration 6).

A compaction is a summary of a session's transcript up to one message (``through_id``) of the
current epoch. The messages stay in ``agent.messages`` (History still lists them); the history
loader (:meth:`SessionStore.transcript_at`) returns the latest summary as the first message and
only the messages after it. A reset moves the epoch on and deletes the older messages, and the
summaries go with them (foreign key ``ON DELETE CASCADE``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import asyncpg

__all__ = ["SUMMARY_HEAD", "CompactionStore", "Live", "summary_message"]

SUMMARY_HEAD = "[Summary of the earlier conversation, which was compacted to save context]"


def summary_message(summary: str) -> dict[str, Any]:
    """How a compaction reaches the model: a user message opening the transcript."""
    return {"role": "user", "content": [{"type": "text", "text": f"{SUMMARY_HEAD}\n{summary}"}]}


@dataclass(frozen=True)
class Live:
    """A session's transcript as the model sees it, with the ids of its stored messages."""

    agent: str
    epoch: int
    summary: str  # "" : never compacted
    ids: list[int]
    messages: list[dict[str, Any]]  # without the summary message
    tool_policy: dict[str, Any] | None
    model: str  # the session's own model ("" : the agent's)
    root_standing: str = ""  # what its root session remembers (sessions/standing.py)

    def view(self) -> list[dict[str, Any]]:
        head = [summary_message(self.summary)] if self.summary else []
        return head + self.messages


@dataclass(frozen=True)
class Compaction:
    session_key: str
    epoch: int
    through_id: int
    summary: str
    reason: str
    messages: int
    tokens_before: int
    tokens_after: int
    facts_flushed: int


class CompactionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def live(self, session_key: str) -> Live | None:
        """The session's live transcript (None: no such session)."""
        rows = await self.pool.fetch(
            "SELECT s.agent, s.epoch, s.tool_policy, s.model, c.summary, m.id, m.role, m.content,"
            " (SELECT standing FROM agent.sessions WHERE session_key ="
            " split_part($1, ':sub:', 1)) AS root_standing"
            " FROM agent.sessions s"
            " LEFT JOIN LATERAL (SELECT summary, through_id FROM agent.compactions"
            " WHERE session_key = s.session_key AND epoch = s.epoch"
            " ORDER BY through_id DESC LIMIT 1) c ON true"
            " LEFT JOIN agent.messages m ON m.session_key = s.session_key AND m.epoch = s.epoch"
            " AND m.id > coalesce(c.through_id, 0)"
            " WHERE s.session_key = $1 ORDER BY m.id",
            session_key,
        )
        if not rows:
            return None
        first = rows[0]
        found = [r for r in rows if r["id"] is not None]
        return Live(
            agent=first["agent"],
            epoch=int(first["epoch"]),
            summary=first["summary"] or "",
            ids=[int(r["id"]) for r in found],
            messages=[{"role": r["role"], "content": json.loads(r["content"])} for r in found],
            tool_policy=json.loads(first["tool_policy"]) if first["tool_policy"] else None,
            model=first["model"],
            root_standing=first["root_standing"] or "",
        )

    async def save(self, c: Compaction) -> bool:
        """Store ``c``; False when the transcript was reset meanwhile (its messages are gone,
        so the summary would describe a conversation that no longer exists)."""
        try:
            saved = await self.pool.fetchval(
                "INSERT INTO agent.compactions (session_key, epoch, through_id, summary, reason,"
                " messages, tokens_before, tokens_after, facts_flushed)"
                " SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 WHERE EXISTS (SELECT 1 FROM"
                " agent.messages WHERE id = $3 AND session_key = $1 AND epoch = $2)"
                " RETURNING id",
                c.session_key,
                c.epoch,
                c.through_id,
                c.summary,
                c.reason,
                c.messages,
                c.tokens_before,
                c.tokens_after,
                c.facts_flushed,
            )
        except asyncpg.ForeignKeyViolationError:
            return False  # deleted by a reset between the check and the insert
        return saved is not None
