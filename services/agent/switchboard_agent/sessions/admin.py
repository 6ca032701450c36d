"""What Sessions.Reset/Delete/Abort/Patch(model) and the chat commands ``/new``, ``/reset``,
``/stop``, ``/status`` and ``/model`` do to a session. Both the gRPC service
(:mod:`..api.sessions`) and the chat commands (:mod:`..api.session_commands`) call these, so each
operation is written once.

The lane cursor is never touched: it says which lane items have been answered, and a reset
changes what the *next* run remembers, not which messages are answered.

- **Reset** moves the session's transcript epoch on and removes the older messages. Items
  still pending on the lane run afterwards, against the empty transcript; a run in progress
  finishes (its reply is delivered, its run row and cursor are committed, so nothing is
  replayed), but its messages are not added to the new transcript (the commit checks the
  epoch, see :mod:`.store`).
- **Delete** aborts the session's run, then does what a reset does and also drops the
  session's overrides (queue mode, tool policy, model), its approval rows and checkpoints,
  and hides it from List until it has a transcript again. The session row itself stays, with
  its lane cursor and the run rows (usage accounting): without the cursor every message of
  the lane still in the stream would be answered again.
- **Abort** interrupts the session's run wherever it runs: an ``AbortRun`` on
  ``sb.runs.abort`` as a request; the replica running it answers, so the caller learns
  whether there was one (no answer within a second: nothing was running).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import nats.errors
from nats.aio.client import Client as NATS

from switchboard import bus
from switchboard.v1 import messages_pb2

log = logging.getLogger(__name__)
ABORT_ANSWER_S = 1.0


@dataclass(frozen=True)
class SessionStatus:
    session_key: str
    exists: bool
    messages: int = 0  # in the current transcript
    runs: int = 0  # since the last reset
    input_tokens: int = 0
    output_tokens: int = 0
    queue_mode: str = ""  # the session's override
    model: str = ""  # the session's override
    last_model: str = ""  # the model of the latest run
    reset_at: datetime | None = None


class SessionAdmin:
    def __init__(self, pool: asyncpg.Pool, nc: NATS, subjects: bus.Subjects) -> None:
        self.pool = pool
        self.nc = nc
        self.subjects = subjects

    async def reset(self, session_key: str) -> int | None:
        """Start a fresh transcript; the number of messages removed (None: no such session)."""
        async with self.pool.acquire() as conn, conn.transaction():
            epoch = await conn.fetchval(
                "UPDATE agent.sessions SET epoch = epoch + 1, reset_at = now(),"
                " updated_at = now() WHERE session_key = $1 RETURNING epoch",
                session_key,
            )
            if epoch is None:
                return None
            removed = await conn.fetchval(
                "WITH gone AS (DELETE FROM agent.messages WHERE session_key = $1"
                " AND epoch < $2 RETURNING 1) SELECT count(*) FROM gone",
                session_key,
                epoch,
            )
        log.info("session reset", extra={"session": session_key})
        return int(removed)

    async def delete(self, session_key: str, requested_by: str = "") -> int | None:
        """Abort the session's run and delete its transcript and settings; the number of
        messages removed (None: no such session)."""
        await self.abort(session_key, requested_by or "delete", wait=False)
        async with self.pool.acquire() as conn, conn.transaction():
            epoch = await conn.fetchval(
                "UPDATE agent.sessions SET epoch = epoch + 1, reset_at = now(),"
                " deleted_at = now(), updated_at = now(), queue_mode = '', tool_policy = NULL,"
                " model = '' WHERE session_key = $1 RETURNING epoch",
                session_key,
            )
            if epoch is None:
                return None
            removed = await conn.fetchval(
                "WITH gone AS (DELETE FROM agent.messages WHERE session_key = $1"
                " AND epoch < $2 RETURNING 1) SELECT count(*) FROM gone",
                session_key,
                epoch,
            )
            await conn.execute("DELETE FROM agent.tool_calls WHERE session_key = $1", session_key)
            await conn.execute(
                "DELETE FROM agent.run_checkpoints WHERE session_key = $1", session_key
            )
        log.info("session deleted", extra={"session": session_key})
        return int(removed)

    async def abort(self, session_key: str, requested_by: str, wait: bool = True) -> bool:
        """Interrupt the session's run on whichever replica runs it; whether one did (with
        ``wait``; without, the request goes out and False comes back at once)."""
        request = messages_pb2.AbortRun(session_key=session_key, requested_by=requested_by)
        if not wait:
            await bus.core_publish(self.nc, self.subjects.runs_abort(), request)
            return False
        try:
            await self.nc.request(
                self.subjects.runs_abort(), request.SerializeToString(), timeout=ABORT_ANSWER_S
            )
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            return False
        return True

    async def set_model(self, session_key: str, agent: str, model: str) -> str:
        """Set (``""``: clear) the session's own model; the value stored."""
        value = await self.pool.fetchval(
            "INSERT INTO agent.sessions (session_key, agent, model) VALUES ($1, $2, $3)"
            " ON CONFLICT (session_key) DO UPDATE SET model = EXCLUDED.model,"
            " updated_at = now() RETURNING model",
            session_key,
            agent,
            model,
        )
        return str(value)

    async def status(self, session_key: str) -> SessionStatus:
        row = await self.pool.fetchrow(
            "SELECT s.queue_mode, s.model, s.reset_at,"
            " (SELECT count(*) FROM agent.messages m WHERE m.session_key = s.session_key"
            " AND m.epoch = s.epoch) AS messages,"
            " r.runs, r.input_tokens, r.output_tokens,"
            " (SELECT model FROM agent.runs l WHERE l.session_key = s.session_key"
            " ORDER BY l.finished_at DESC LIMIT 1) AS last_model"
            " FROM agent.sessions s,"
            " LATERAL (SELECT count(*) AS runs, coalesce(sum(input_tokens), 0) AS input_tokens,"
            " coalesce(sum(output_tokens), 0) AS output_tokens FROM agent.runs x"
            " WHERE x.session_key = s.session_key"
            " AND (s.reset_at IS NULL OR x.finished_at > s.reset_at)) AS r"
            " WHERE s.session_key = $1",
            session_key,
        )
        if row is None:
            return SessionStatus(session_key, exists=False)
        return SessionStatus(
            session_key,
            exists=True,
            messages=int(row["messages"]),
            runs=int(row["runs"]),
            input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]),
            queue_mode=row["queue_mode"],
            model=row["model"],
            last_model=row["last_model"] or "",
            reset_at=row["reset_at"],
        )
