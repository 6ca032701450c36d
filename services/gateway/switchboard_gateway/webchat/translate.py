"""The agent's events (``AgentEvent`` on ``sb.events.<session token>``) as WebChat events:
assistant deltas, tool phases with a short summary, run lifecycle and run errors, and the
messages its ``message`` tool shows in this chat (with images). Tool output
updates (partial output of a running tool) are not forwarded: a tool card shows the start and
the result."""

from __future__ import annotations

import json
from typing import Any

from switchboard.media import parse_media_ref
from switchboard.v1 import messages_pb2

from ..media_api import media_url
from .protocol import (
    AssistantDelta,
    ChatMessage,
    Frame,
    Lifecycle,
    MediaItem,
    RunError,
    ToolPhase,
)

SUMMARY_CHARS = 200


def summarize(value: Any, limit: int = SUMMARY_CHARS) -> str:
    """``value`` on one line (JSON unless it is text), at most ``limit`` characters."""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    )
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def _data(e: messages_pb2.AgentEvent) -> dict[str, Any]:
    if not e.data_json:
        return {}
    try:
        data = json.loads(e.data_json)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _ids(e: messages_pb2.AgentEvent) -> list[str]:
    return list(e.message_ids) or ([e.message_id] if e.message_id else [])


def translate(e: messages_pb2.AgentEvent) -> tuple[str, Frame] | None:
    """The WebChat event for ``e`` as (event name, payload), or None when none is sent."""
    if e.stream == "assistant" and e.phase == "delta":
        return "assistant", AssistantDelta(run_id=e.run_id, text=e.text)
    if e.stream == "tool" and e.phase == "result" and e.tool == "message":
        shown = _chat_message(e, _data(e))
        if shown is not None:
            return "message", shown
    if e.stream == "tool" and e.phase in ("start", "approval", "result"):
        data = _data(e)
        tool = ToolPhase.model_validate(
            {"run_id": e.run_id, "call_id": e.call_id, "tool": e.tool, "phase": e.phase}
        )
        if e.phase == "start":
            tool.summary = summarize(data.get("args", {}))
        elif e.phase == "approval":
            tool.approval_id = str(data.get("approval_id", ""))
            tool.status = str(data.get("status", ""))
            tool.summary = summarize(data.get("args", {}))
        else:
            tool.summary = summarize(e.text)
            tool.is_error = bool(data.get("is_error", False))
        return "tool", tool
    if e.stream == "lifecycle" and e.phase in ("start", "end"):
        life = Lifecycle.model_validate(
            {"run_id": e.run_id, "phase": e.phase, "message_ids": _ids(e)}
        )
        if e.phase == "end":
            life.status = str(_data(e).get("status", "completed"))
            life.stop_reason = e.stop_reason or None
            life.text = e.text
            if e.HasField("usage"):
                life.input_tokens = e.usage.input_tokens
                life.output_tokens = e.usage.output_tokens
        return "lifecycle", life
    if e.stream == "error":
        return "run_error", RunError(run_id=e.run_id, message=e.text or "The run failed.")
    return None


def _chat_message(e: messages_pb2.AgentEvent, data: dict[str, Any]) -> ChatMessage | None:
    """The ``message`` tool's message to this WebChat (its result says ``channel: webchat``),
    its files to be fetched from ``GET /api/media/<sha256>``."""
    if data.get("channel") != "webchat" or data.get("is_error"):
        return None
    items = []
    for ref in data.get("media") or []:
        found = parse_media_ref(str(ref))
        if found is not None:
            items.append(MediaItem(ref=str(ref), mime=found.mime, url=media_url(found.sha256)))
    return ChatMessage(
        run_id=e.run_id, call_id=e.call_id, text=str(data.get("text") or ""), media=items
    )
