"""Deciding approvals from a chat: the router turns ``/approve <id> [reason]`` and ``/deny <id>
[reason]`` from an admitted sender into a ``ChatDecision`` request on ``sb.approvals.decide``;
an agent replica (queue group: any one of them) answers it here with a ``ChatDecisionResult``.

Who may decide (:func:`switchboard.trust.may_decide_approval`, docs/trust.md): an owner any
approval (the router stamps ``owner`` on the senders of ``SB_OWNERS``, with ``SB_APPROVERS``
folded in); the person of a direct conversation (role ``user``, whose messages there route to
that session) the approvals of their own conversation and its sub-agents; nobody else, in a
group least of all. The router has admitted and identified the sender and stamped its role,
and only the router (and the agents) may publish on ``sb.approvals.decide``
(:mod:`switchboard.natsauth`), so the request is trusted here. Anyone else is refused before
the approval's state is revealed: a stranger learns neither whether it was decided nor which
tool it is about; a sender who may decide nothing at all (a group's member) is refused before
any lookup. The decider is recorded as ``decided_by`` (``<channel>:<sender id>``), its role in
the log line of the decision.

The decision itself takes the path of gRPC ``Approvals.Decide``: :meth:`ApprovalStore.decide`
(final, first decision wins) and :meth:`ApprovalWaiter.notify` to wake the waiting run.

Ids: approval ids are ``ap_`` + 20 hex digits. Chats see a short form (:func:`short_id`: the
first 8 hex digits, longer if another approval shares them), and a decision may give any
prefix of 6 or more hex digits, with or without ``ap_``; a prefix that matches several approvals
is refused as ambiguous."""

from __future__ import annotations

import logging
import re

import asyncpg
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from switchboard import bus, trust
from switchboard.errors import InvalidPayload
from switchboard.v1 import approvals_pb2

from ..metrics import CHAT_DECISIONS
from .store import AlreadyDecided, ApprovalNotFound, ApprovalRow, ApprovalStore, ApprovalWaiter

log = logging.getLogger(__name__)

ID_PREFIX = "ap_"
MIN_TYPED = 6  # hex digits a decision must give at least
SHORT = 8  # hex digits a notice shows at least
QUEUE_GROUP = "agent-approvals"
_TYPED_ID = re.compile(rf"(?:ap_)?([0-9a-f]{{{MIN_TYPED},64}})", re.IGNORECASE)

DECIDED = "decided"
NOT_FOUND = "not_found"
ALREADY_DECIDED = "already_decided"
NOT_ALLOWED = "not_allowed"
AMBIGUOUS = "ambiguous"
INVALID = "invalid"
ERROR = "error"


def typed_hex(typed: str) -> str | None:
    """The hex digits of an id as typed in a chat (``ap_`` optional, any case), or None."""
    found = _TYPED_ID.fullmatch(typed.strip())
    return found.group(1).lower() if found else None


async def short_id(pool: asyncpg.Pool, approval_id: str) -> str:
    """The hex digits of ``approval_id`` a chat needs to name it: the first :data:`SHORT`, or
    one more than any other approval shares with it."""
    digits = approval_id.removeprefix(ID_PREFIX)
    others = await pool.fetch(
        "SELECT approval_id FROM agent.tool_calls WHERE left(approval_id, $2) = left($1, $2)"
        " AND approval_id <> $1",
        approval_id,
        len(ID_PREFIX) + SHORT,
    )
    shared = 0
    for r in others:
        other = str(r["approval_id"]).removeprefix(ID_PREFIX)
        common = next(
            (i for i, (a, b) in enumerate(zip(digits, other, strict=False)) if a != b),
            min(len(digits), len(other)),
        )
        shared = max(shared, common)
    return digits[: max(SHORT, shared + 1)]


async def find_by_prefix(pool: asyncpg.Pool, digits: str, limit: int = 2) -> list[ApprovalRow]:
    """Approvals whose id starts with ``ap_<digits>`` (``digits``: hex, from :func:`typed_hex`,
    so it holds no LIKE wildcard)."""
    rows = await pool.fetch(
        "SELECT * FROM agent.tool_calls WHERE approval_id LIKE $1 ORDER BY approval_id LIMIT $2",
        f"{ID_PREFIX}{digits}%",
        limit,
    )
    return [ApprovalRow.from_record(r) for r in rows]


def result(outcome: str, row: ApprovalRow | None = None) -> approvals_pb2.ChatDecisionResult:
    CHAT_DECISIONS.labels(outcome).inc()
    if row is None:
        return approvals_pb2.ChatDecisionResult(outcome=outcome)
    return approvals_pb2.ChatDecisionResult(
        outcome=outcome, approval_id=row.approval_id, status=row.status, tool=row.tool
    )


class ChatDecisions:
    def __init__(self, store: ApprovalStore, waiter: ApprovalWaiter) -> None:
        self.store = store
        self.waiter = waiter

    async def subscribe(self, nc: NATS, subjects: bus.Subjects) -> Subscription:
        return await nc.subscribe(
            subjects.approvals_decide(), queue=QUEUE_GROUP, cb=self._on_request
        )

    @staticmethod
    def may_decide(request: approvals_pb2.ChatDecision, session_key: str) -> bool:
        """May the request's sender decide an approval of ``session_key``?"""
        return trust.may_decide_approval(request.role, request.session_key, session_key)

    async def decide(self, request: approvals_pb2.ChatDecision) -> approvals_pb2.ChatDecisionResult:
        digits = typed_hex(request.approval_id)
        if digits is None or not request.sender:
            return result(INVALID)
        if not self.may_decide(request, request.session_key):  # may decide nothing at all
            log.info(
                "a chat decision was refused",
                extra={"sender": request.sender, "role": request.role or "none"},
            )
            return result(NOT_ALLOWED)
        rows = await find_by_prefix(self.store.pool, digits)
        if not rows:
            return result(NOT_FOUND)
        if len(rows) > 1:
            return result(AMBIGUOUS)
        row = rows[0]
        if not self.may_decide(request, row.session_key):
            log.info(
                "a chat decision was refused",
                extra={"session": row.session_key, "sender": request.sender, "role": request.role},
            )
            return result(NOT_ALLOWED)
        status = "approved" if request.approve else "denied"
        try:
            decided = await self.store.decide(
                row.approval_id, status, request.sender, request.reason[:2000]
            )
        except ApprovalNotFound:
            return result(NOT_FOUND)
        except AlreadyDecided as exc:
            return result(ALREADY_DECIDED, exc.row)
        await self.waiter.notify(decided.run_id)
        log.info(
            "approval %s from a chat by %s (%s)",
            status,
            request.sender,
            request.role,
            extra={
                "session": decided.session_key,
                "run_id": decided.run_id,
                "approval_id": decided.approval_id,
                "decided_by": request.sender,
                "role": request.role,
            },
        )
        return result(DECIDED, decided)

    async def _on_request(self, msg: Msg) -> None:
        if not msg.reply:
            return
        try:
            request = bus.decode(approvals_pb2.ChatDecision, msg.data)
        except InvalidPayload:
            await msg.respond(result(INVALID).SerializeToString())
            return
        try:
            answer = await self.decide(request)
        except Exception:
            log.exception("deciding an approval from a chat failed")
            answer = result(ERROR)
        await msg.respond(answer.SerializeToString())
