"""Sub-agent children in PostgreSQL (``agent.subagents``, migration 6): who spawned which
child session, in which mode, and whether it finished. A row is written before the child's
first lane item is published, so any replica can tell, when the child's run commits, whether
its result is to be announced into the parent session (``background``) or is waited for
(``wait``); the mode changes from ``wait`` to ``background`` when the wait times out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

RUNNING = "running"
DONE = "done"
WAIT = "wait"
BACKGROUND = "background"


@dataclass(frozen=True)
class Child:
    child_key: str
    message_id: str  # the id of the child's first (and only spawned) lane item
    label: str
    task: str
    mode: str  # wait | background
    status: str = RUNNING  # running | done
    created_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class Finished:
    """A child whose run committed: its mode then and where to announce its result."""

    parent_key: str
    label: str
    mode: str
    origin: bytes  # the parent run's lane item (serialized LaneItem)


_COLUMNS = "child_key, message_id, label, task, mode, status, created_at, finished_at"


def _child(row: asyncpg.Record) -> Child:
    return Child(*(row[c.strip()] for c in _COLUMNS.split(",")))


class SubagentStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def add(
        self,
        *,
        parent_key: str,
        agent: str,
        parent_run_id: str,
        children: Sequence[Child],
        origin: bytes,
        max_per_run: int,
    ) -> tuple[bool, int]:
        """Record ``children`` of the run ``parent_run_id`` unless that takes the run over
        ``max_per_run`` children (False: refused, nothing written); and how many children the
        run had besides these. Rows that exist already (a resumed run spawning the same
        children again) are kept."""
        async with self.pool.acquire() as conn, conn.transaction():
            # One run's spawn calls may come at once (one turn's calls run concurrently).
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", parent_run_id)
            keys = [c.child_key for c in children]
            before = int(
                await conn.fetchval(
                    "SELECT count(*) FROM agent.subagents WHERE parent_run_id = $1"
                    " AND NOT child_key = ANY($2::text[])",
                    parent_run_id,
                    keys,
                )
            )
            if before + len(children) > max_per_run:
                return False, before
            await conn.executemany(
                "INSERT INTO agent.subagents (child_key, parent_key, agent, parent_run_id,"
                " message_id, label, task, mode, origin) VALUES ($1, $2, $3, $4, $5, $6, $7,"
                " $8, $9) ON CONFLICT (child_key) DO NOTHING",
                [
                    (
                        c.child_key,
                        parent_key,
                        agent,
                        parent_run_id,
                        c.message_id,
                        c.label,
                        c.task,
                        c.mode,
                        origin,
                    )
                    for c in children
                ],
            )
            return True, before

    async def finish(self, child_key: str, message_id: str) -> Finished | None:
        """Mark the child done (once); None when it is no spawned child or was done before.
        Atomic against :meth:`to_background`: the mode returned is the one that holds."""
        row = await self.pool.fetchrow(
            "UPDATE agent.subagents SET status = $3, finished_at = now()"
            " WHERE child_key = $1 AND message_id = $2 AND status = $4"
            " RETURNING parent_key, label, mode, origin",
            child_key,
            message_id,
            DONE,
            RUNNING,
        )
        if row is None:
            return None
        return Finished(row["parent_key"], row["label"], row["mode"], bytes(row["origin"]))

    async def announce_pending(self, child_key: str, message_id: str) -> Finished | None:
        """A done background child (for a replay: its announcement may not have gone out)."""
        row = await self.pool.fetchrow(
            "SELECT parent_key, label, mode, origin FROM agent.subagents"
            " WHERE child_key = $1 AND message_id = $2 AND status = $3 AND mode = $4",
            child_key,
            message_id,
            DONE,
            BACKGROUND,
        )
        if row is None:
            return None
        return Finished(row["parent_key"], row["label"], row["mode"], bytes(row["origin"]))

    async def to_background(self, child_key: str) -> bool:
        """A waited-for child still running: announce it when it finishes instead. False when
        it finished in the meantime (its result is in its transcript)."""
        moved = await self.pool.fetchval(
            "UPDATE agent.subagents SET mode = $2 WHERE child_key = $1 AND status = $3 RETURNING 1",
            child_key,
            BACKGROUND,
            RUNNING,
        )
        return moved is not None

    async def children(self, parent_key: str, limit: int = 50) -> list[Child]:
        rows = await self.pool.fetch(
            f"SELECT {_COLUMNS} FROM agent.subagents WHERE parent_key = $1"
            " ORDER BY created_at DESC LIMIT $2",
            parent_key,
            limit,
        )
        return [_child(r) for r in rows]

    async def get(self, child_key: str) -> Child | None:
        row = await self.pool.fetchrow(
            f"SELECT {_COLUMNS} FROM agent.subagents WHERE child_key = $1", child_key
        )
        return _child(row) if row else None

    async def drop(self, child_key: str) -> None:
        """Forget a child that was never started (its wait ended before its turn)."""
        await self.pool.execute(
            "DELETE FROM agent.subagents WHERE child_key = $1 AND status = $2", child_key, RUNNING
        )

    async def session_target(self, session_key: str) -> tuple[str, str] | None:
        """The agent of a session (a stored one, or a spawned child that has no row yet) and
        the standing its root session remembers ("" : unknown); None: no such session. One
        round trip (the session tools ask it for every target)."""
        row = await self.pool.fetchrow(
            "SELECT coalesce(s.agent, c.agent) AS agent, (SELECT standing FROM agent.sessions"
            " WHERE session_key = split_part($1, ':sub:', 1)) AS root_standing"
            " FROM (SELECT 1) AS one LEFT JOIN agent.sessions s ON s.session_key = $1"
            " LEFT JOIN agent.subagents c ON c.child_key = $1",
            session_key,
        )
        if row is None or row["agent"] is None:
            return None
        return str(row["agent"]), str(row["root_standing"] or "")
