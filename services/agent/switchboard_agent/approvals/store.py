"""Tool calls that need the user's approval, and the checkpoints of runs waiting for one.

A run that reaches such a call stores a row per call (``awaiting_approval``) and a checkpoint of
its state, then waits without holding an executor. Any agent replica can record the decision
(gRPC ``Approvals.Decide``); it then publishes on ``sb.approvals.<run id>`` to wake the waiting
run, which also polls, so a lost notification only delays it. If the owner dies meanwhile, the
lane item is redelivered and the next owner resumes from the checkpoint: the rows are keyed by
(run id, call id), so the same approvals are found again instead of being asked twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from switchboard import bus

AWAITING = "awaiting_approval"
DECIDED = ("approved", "denied", "expired", "cancelled")


class ApprovalNotFound(Exception):
    """No approval with that id."""


class AlreadyDecided(Exception):
    """The approval was decided before; decisions are final."""

    def __init__(self, row: ApprovalRow) -> None:
        super().__init__(row.approval_id)
        self.row = row


@dataclass(frozen=True)
class ApprovalRow:
    approval_id: str
    run_id: str
    session_key: str
    agent: str
    call_id: str
    tool: str
    args: dict[str, Any]
    rule: str
    status: str
    decided_by: str
    reason: str
    requested_at: datetime
    decided_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def from_record(cls, r: asyncpg.Record) -> ApprovalRow:
        return cls(
            approval_id=r["approval_id"],
            run_id=r["run_id"],
            session_key=r["session_key"],
            agent=r["agent"],
            call_id=r["call_id"],
            tool=r["tool"],
            args=json.loads(r["args"]),
            rule=r["rule"],
            status=r["status"],
            decided_by=r["decided_by"],
            reason=r["reason"],
            requested_at=r["requested_at"],
            decided_at=r["decided_at"],
            started_at=r["started_at"],
            finished_at=r["finished_at"],
        )


@dataclass(frozen=True)
class Checkpoint:
    run_id: str
    state: dict[str, Any]


class ApprovalStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def request(
        self,
        *,
        run_id: str,
        session_key: str,
        agent: str,
        call_id: str,
        tool: str,
        args: dict[str, Any],
        rule: str,
    ) -> ApprovalRow:
        """The call's row: created ``awaiting_approval``, or the existing one (a resumed run)."""
        record = await self.pool.fetchrow(
            "INSERT INTO agent.tool_calls (approval_id, run_id, session_key, agent, call_id, tool,"
            " args, rule, status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            " ON CONFLICT (run_id, call_id) DO UPDATE SET run_id = EXCLUDED.run_id RETURNING *",
            f"ap_{uuid.uuid4().hex[:20]}",
            run_id,
            session_key,
            agent,
            call_id,
            tool,
            json.dumps(args),
            rule,
            AWAITING,
        )
        return ApprovalRow.from_record(record)

    async def get(self, approval_id: str) -> ApprovalRow | None:
        r = await self.pool.fetchrow(
            "SELECT * FROM agent.tool_calls WHERE approval_id = $1", approval_id
        )
        return ApprovalRow.from_record(r) if r else None

    async def statuses(self, approval_ids: list[str]) -> dict[str, ApprovalRow]:
        rows = await self.pool.fetch(
            "SELECT * FROM agent.tool_calls WHERE approval_id = ANY($1::text[])", approval_ids
        )
        return {r["approval_id"]: ApprovalRow.from_record(r) for r in rows}

    async def decide(
        self, approval_id: str, status: str, decided_by: str = "", reason: str = ""
    ) -> ApprovalRow:
        """Record a final decision (``approved``, ``denied``, ``expired``, ``cancelled``)."""
        if status not in DECIDED:
            raise ValueError(f"not a decision: {status!r}")
        r = await self.pool.fetchrow(
            "UPDATE agent.tool_calls SET status = $2, decided_by = $3, reason = $4,"
            " decided_at = now() WHERE approval_id = $1 AND status = $5 RETURNING *",
            approval_id,
            status,
            decided_by,
            reason,
            AWAITING,
        )
        if r is not None:
            return ApprovalRow.from_record(r)
        existing = await self.get(approval_id)
        if existing is None:
            raise ApprovalNotFound(approval_id)
        raise AlreadyDecided(existing)

    async def expire_overdue(self, approval_ids: list[str], timeout_s: float) -> int:
        """Expire the given approvals still waiting after ``timeout_s`` (database clock)."""
        rows = await self.pool.fetch(
            "UPDATE agent.tool_calls SET status = 'expired', decided_by = 'system',"
            " reason = 'no decision in time', decided_at = now()"
            " WHERE approval_id = ANY($1::text[]) AND status = $2"
            " AND requested_at <= now() - make_interval(secs => $3) RETURNING approval_id",
            approval_ids,
            AWAITING,
            timeout_s,
        )
        return len(rows)

    async def cancel_run(self, run_id: str, reason: str) -> None:
        await self.pool.execute(
            "UPDATE agent.tool_calls SET status = 'cancelled', reason = $2, decided_at = now()"
            " WHERE run_id = $1 AND status = $3",
            run_id,
            reason,
            AWAITING,
        )

    async def mark(self, approval_ids: list[str], column: str) -> None:
        """Stamp ``started_at`` or ``finished_at`` on approved calls."""
        if column not in ("started_at", "finished_at") or not approval_ids:
            return
        await self.pool.execute(
            f"UPDATE agent.tool_calls SET {column} = now()"  # column checked above
            " WHERE approval_id = ANY($1::text[])",
            approval_ids,
        )

    async def find(
        self, session_key: str = "", status: str = "", limit: int = 100
    ) -> list[ApprovalRow]:
        rows = await self.pool.fetch(
            "SELECT * FROM agent.tool_calls WHERE ($1 = '' OR session_key = $1)"
            " AND ($2 = '' OR status = $2) ORDER BY requested_at DESC LIMIT $3",
            session_key,
            status,
            limit,
        )
        return [ApprovalRow.from_record(r) for r in rows]

    async def save_checkpoint(
        self, session_key: str, inbound_id: str, run_id: str, state: dict[str, Any]
    ) -> None:
        await self.pool.execute(
            "INSERT INTO agent.run_checkpoints (session_key, inbound_id, run_id, state)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT (session_key, inbound_id) DO UPDATE"
            " SET run_id = EXCLUDED.run_id, state = EXCLUDED.state, saved_at = now()",
            session_key,
            inbound_id,
            run_id,
            json.dumps(state),
        )


class ApprovalWaiter:
    """Waits until every given approval is decided, woken by NATS and by polling."""

    def __init__(
        self, nc: NATS, subjects: bus.Subjects, store: ApprovalStore, poll_s: float = 2.0
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.store = store
        self.poll_s = poll_s

    async def notify(self, run_id: str) -> None:
        await self.nc.publish(self.subjects.approvals(run_id), b"")

    async def wait(
        self, run_id: str, rows: list[ApprovalRow], timeout_s: float
    ) -> dict[str, ApprovalRow]:
        """The decided rows by approval id; undecided ones expire ``timeout_s`` after their
        request (so a resumed run does not restart the clock)."""
        woken = asyncio.Event()

        async def on_decision(_: Msg) -> None:
            woken.set()

        ids = [r.approval_id for r in rows]
        sub = await self.nc.subscribe(self.subjects.approvals(run_id), cb=on_decision)
        try:
            while True:
                woken.clear()
                current = await self.store.statuses(ids)
                waiting = [r for r in current.values() if r.status == AWAITING]
                if not waiting:
                    return current
                if await self.store.expire_overdue(ids, timeout_s):
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), self.poll_s)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
