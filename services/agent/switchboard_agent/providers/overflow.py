"""What a model call does when the provider says the context is too long, when compaction
cannot help: the fallback.

A run's failover (providers/failover.py, ``RoutedModel.on_overflow``) compacts the session for real
(compaction/compactor.py) before its single retry; :func:`compact_for_retry` is what the retry
carries when there is nothing older to compact (one long run), the compaction failed, or no run is
behind the call: the system prompt and the recent tail of the conversation, starting at a
user turn (never at a tool result whose tool_use was dropped), and a note in the system prompt
that earlier turns were left out. The stored transcript is not touched.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .base import ModelRequest

__all__ = ["OMITTED_NOTE", "compact_for_retry", "is_fresh_user"]

OMITTED_NOTE = (
    "[Earlier turns of this conversation were left out of this request because it did not fit "
    "the model's context window.]"
)
_TEXT_CAP = 4000  # chars kept of each long block when even the last turn alone is too long


def is_fresh_user(message: dict[str, Any]) -> bool:
    """A user turn that is not (only) tool results: a conversation may start there."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if not isinstance(content, list):
        return True
    return not any(b.get("type") == "tool_result" for b in content if isinstance(b, dict))


def _clip(block: dict[str, Any]) -> dict[str, Any]:
    for key in ("text", "content"):
        value = block.get(key)
        if isinstance(value, str) and len(value) > _TEXT_CAP:
            block = {**block, key: value[:_TEXT_CAP] + " [...cut: too long for the context]"}
    return block


def compact_for_retry(request: ModelRequest) -> ModelRequest:
    """``request`` with about the older half of its messages dropped (at a user-turn
    boundary); when there is no such boundary, long text and tool results are clipped."""
    messages = request.messages
    cuts = [i for i, m in enumerate(messages) if i > 0 and is_fresh_user(m)]
    half = len(messages) // 2
    later = [i for i in cuts if i >= half]
    cut = later[0] if later else (cuts[-1] if cuts else 0)
    system = f"{request.system}\n\n{OMITTED_NOTE}" if request.system else OMITTED_NOTE
    if cut > 0:
        return replace(request, system=system, messages=list(messages[cut:]))
    clipped = [
        {
            **m,
            "content": [_clip(b) if isinstance(b, dict) else b for b in m["content"]]
            if isinstance(m.get("content"), list)
            else m.get("content"),
        }
        for m in messages
    ]
    return replace(request, system=system, messages=clipped)
