"""A committed run's reply, rebuilt from its transcript, so that a replay can publish the same
outbound parts again (under the same ids, which the OUTBOUND dedupe window drops).

The reply is the run's text as the runner streams it: the text blocks of each model response,
``"\\n\\n"`` between responses that have text, and the runner's own closing note (the
``max_iterations`` note, the model-error apology) appended without a separator. It differs from
the streamed text only where the stream never reached the transcript (a model stream that
failed half way). :func:`reply_text` is pure, so the runner can publish the very same text from
``record.messages`` that a replay rebuilds from the database."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from ..sessions.store import Message


@dataclass(frozen=True)
class CommittedReply:
    run_id: str
    text: str
    message_ids: list[str]  # what the database knows: the run's own inbound message id
    status: str  # "completed" | "error" | "interrupted"...
    lane_seq: int  # the lane sequence the run's commit moved the cursor to


def _is_tool_results(message: Message) -> bool:
    return any(b.get("type") == "tool_result" for b in message["content"])


def _text(message: Message) -> str:
    return "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")


def _own_start(messages: Sequence[Message]) -> int:
    """Index just after the run's own user turn. Before it may come the context messages a
    request brought (text only); after it come model responses, tool results, and user turns
    that joined the run later (steered, or late after a resume), each right after tool results."""
    i = len(messages) - 1
    while i >= 0:
        m = messages[i]
        if m["role"] == "user" and not _is_tool_results(m):
            before = messages[i - 1] if i > 0 else None
            if before is None or before["role"] != "user" or not _is_tool_results(before):
                return i + 1
        i -= 1
    return 0


def reply_text(messages: Sequence[Message], status: str, stop_reason: str) -> str:
    """The reply of one run from its transcript rows (``record.messages``), with the run's
    ``status`` and ``stop_reason`` telling whether its last assistant message is a note."""
    own = [m for m in messages[_own_start(messages) :] if m["role"] == "assistant"]
    note = status == "error" or stop_reason == "max_iterations"
    out = ""
    for k, message in enumerate(own):
        text = _text(message)
        if note and k == len(own) - 1:
            out += text
        elif text:
            out += ("\n\n" if out else "") + text
    return out


_RUN = (
    "SELECT run_id, inbound_id, status, stop_reason, lane_seq FROM agent.runs"
    " WHERE session_key = $1 AND {where}"
    " AND ($2::float8 IS NULL OR finished_at >= now() - make_interval(secs => $2::float8))"
)


async def committed_reply(
    pool: asyncpg.Pool, session_key: str, inbound_id: str, within_s: float | None = None
) -> CommittedReply | None:
    """The reply of the committed run that answered ``inbound_id``, or ``None`` when there is
    none (or, with ``within_s``, when it was committed longer ago than that: past the OUTBOUND
    dedupe window a republish would not be dropped and would reach the user twice)."""
    row = await pool.fetchrow(
        _RUN.format(where="inbound_id = $3"), session_key, within_s, inbound_id
    )
    return await _reply(pool, session_key, row) if row else None


async def latest_reply(
    pool: asyncpg.Pool, session_key: str, within_s: float | None = None
) -> CommittedReply | None:
    """The reply of the session's last committed run (the one a dead lane owner may have
    committed without publishing), or ``None``; ``within_s`` as in :func:`committed_reply`."""
    row = await pool.fetchrow(
        _RUN.format(where="TRUE") + " ORDER BY lane_seq DESC, finished_at DESC LIMIT 1",
        session_key,
        within_s,
    )
    return await _reply(pool, session_key, row) if row else None


async def _reply(pool: asyncpg.Pool, session_key: str, row: Any) -> CommittedReply:
    rows = await pool.fetch(
        "SELECT role, content FROM agent.messages WHERE session_key = $1 AND run_id = $2"
        " ORDER BY id",
        session_key,
        row["run_id"],
    )
    messages: list[Message] = [
        {"role": r["role"], "content": json.loads(r["content"])} for r in rows
    ]
    return CommittedReply(
        run_id=row["run_id"],
        text=reply_text(messages, row["status"], row["stop_reason"]),
        message_ids=[row["inbound_id"]],
        status=row["status"],
        lane_seq=int(row["lane_seq"]),
    )
