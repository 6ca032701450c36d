"""The state of one run as the tool loop goes, and its checkpoint: what a run waiting for an
approval saves so that another replica can resume it after the owner died."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from switchboard.trust import Standing
from switchboard.v1 import messages_pb2

from ..outbound.events import RunEvents
from ..sessions.store import Message, RunRecord
from ..tools.policy import Policy
from .queueing import Batch, PendingItem, RunControl


@dataclass
class Turn:
    record: RunRecord
    events: RunEvents
    control: RunControl
    policy: Policy
    resumed: bool  # restored from a checkpoint; cleared once its pending tool calls ran
    reply: list[str] = field(default_factory=list)  # the text as streamed
    late: list[PendingItem] = field(default_factory=list)  # batch items the checkpoint lacks
    # The lane item that started the run: its chat is the run's chat (the message tool's
    # "current" target, where approval notices go).
    origin: messages_pb2.LaneItem = field(default_factory=messages_pb2.LaneItem)
    # What the run may touch (docs/trust.md, sessions/standing.py): its tools' workspace, the files
    # in its prompt, its memory, how far the session tools see. Unknown: the least but a group's.
    standing: Standing = Standing.PERSONAL


def checkpoint_state(turn: Turn) -> dict[str, Any]:
    r = turn.record
    return {
        "messages": r.messages,
        "input_tokens": r.input_tokens,
        "output_tokens": r.output_tokens,
        "iterations": r.iterations,
        "model": r.model,
        "started_at": r.started_at.isoformat(),
        "message_ids": list(turn.events.message_ids),
        "reply": "".join(turn.reply),
    }


def restore(turn: Turn, state: dict[str, Any], batch: Batch) -> None:
    r = turn.record
    r.messages = list(state["messages"])
    r.input_tokens = int(state["input_tokens"])
    r.output_tokens = int(state["output_tokens"])
    r.iterations = int(state["iterations"])
    r.model = str(state["model"])
    r.started_at = datetime.fromisoformat(state["started_at"])
    r.checkpointed = True
    if state["reply"]:
        turn.reply.append(state["reply"])
    known = set(state["message_ids"])
    turn.late = [p for p in batch.items if p.item.message.message_id not in known]


def pending_tool_uses(messages: list[Message]) -> list[dict[str, Any]]:
    """The tool_use blocks of a final assistant message (calls without results yet)."""
    last = messages[-1] if messages else None
    if not last or last["role"] != "assistant":
        return []
    return [b for b in last["content"] if b.get("type") == "tool_use"]


def text_message(role: str, text: str) -> Message:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def user_turn(
    items: list[PendingItem], attachments: list[list[dict[str, Any]]] | None = None
) -> Message:
    """One user turn: a text block per lane item (several when collected or steered), each
    followed by the blocks of its attachments (``attachments[i]`` for ``items[i]``)."""
    content: list[dict[str, Any]] = []
    for n, p in enumerate(items):
        extra = attachments[n] if attachments and n < len(attachments) else []
        if p.item.message.text or not extra:
            content.append({"type": "text", "text": p.item.message.text})
        content.extend(extra)
    return {"role": "user", "content": content}
