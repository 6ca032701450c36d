"""What the model sees of a transcript, measured and trimmed: pure functions, no I/O.

- :func:`request_chars` and :class:`ContextMeter`: the size of a request in tokens. The best
  measure is the provider's own ``input_tokens`` of the session's last call; what changed since
  is counted as characters / 4 (no tokenizer: tiktoken downloads its tables at run time). An
  image counts as a fixed ~1,600 tokens, not its base64 length.
- :func:`prune_tool_results`: tool results older than the last N user turns become a short
  note in the request (the stored transcript keeps them).
- :func:`choose_cut`: where older turns end and the kept tail starts (always at a user turn,
  never between a tool call and its result).
- :func:`render`: older turns as plain text, for the flush and the summary calls.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from switchboard.toolspec import ToolSpec

from ..providers.overflow import is_fresh_user

__all__ = [
    "ContextMeter",
    "choose_cut",
    "message_chars",
    "prune_tool_results",
    "render",
    "request_chars",
]

Message = dict[str, Any]
IMAGE_CHARS = 6_400  # ~1,600 tokens: what a resized image costs (Anthropic: w*h/750)
MESSAGE_CHARS = 16  # role and framing
PRUNE_MIN_CHARS = 300  # shorter results are kept: the note would save nothing
RESULT_RENDER_CHARS = 600  # of each tool result in the text the summary is made from


def _block_chars(block: Any) -> int:
    if not isinstance(block, dict):
        return len(str(block))
    kind = block.get("type")
    if kind == "text":
        return len(str(block.get("text", "")))
    if kind == "image":
        return IMAGE_CHARS
    if kind == "tool_use":
        return len(str(block.get("name", ""))) + len(json.dumps(block.get("input") or {}))
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return sum(_block_chars(b) for b in content)
        return len(str(content or ""))
    return len(json.dumps(block))


def message_chars(message: Message) -> int:
    content = message.get("content")
    if isinstance(content, list):
        return MESSAGE_CHARS + sum(_block_chars(b) for b in content)
    return MESSAGE_CHARS + len(str(content or ""))


def request_chars(system: str, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
    return len(system) + sum(t.chars for t in tools) + sum(message_chars(m) for m in messages)


class ContextMeter:
    """Each session's last request (its size in characters, the tokens the provider counted),
    to estimate the next one; the most recent ``capacity`` sessions are kept, per replica."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._last: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def estimate(self, session_key: str, chars: int) -> int:
        last = self._last.get(session_key)
        if last is None:
            return chars // 4
        last_chars, last_tokens = last
        if chars >= last_chars:
            return last_tokens + (chars - last_chars) // 4
        return last_tokens * chars // max(1, last_chars)  # shrunk (compacted, pruned)

    def observe(self, session_key: str, chars: int, input_tokens: int) -> None:
        if input_tokens <= 0 or chars <= 0:
            return  # a provider that reports nothing: keep estimating by characters
        self._last[session_key] = (chars, input_tokens)
        self._last.move_to_end(session_key)
        while len(self._last) > self.capacity:
            self._last.popitem(last=False)

    def forget(self, session_key: str) -> None:
        self._last.pop(session_key, None)


def _turn_starts(messages: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if is_fresh_user(m)]


def prune_tool_results(messages: list[Message], keep_turns: int) -> list[Message]:
    """``messages`` with each tool result older than the last ``keep_turns`` user turns that
    is longer than a note replaced by one (0: nothing pruned). Unchanged messages are the
    same objects."""
    starts = _turn_starts(messages)
    if keep_turns <= 0 or len(starts) <= keep_turns:
        return messages
    boundary = starts[-keep_turns]
    names: dict[str, str] = {}
    out: list[Message] = []
    for i, message in enumerate(messages):
        content = message.get("content")
        if i >= boundary or not isinstance(content, list):
            out.append(message)
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name", "tool"))
        blocks = [_pruned(b, names) for b in content]
        changed = any(a is not b for a, b in zip(blocks, content, strict=True))
        out.append({**message, "content": blocks} if changed else message)
    return out


def _pruned(block: Any, names: dict[str, str]) -> Any:
    if not isinstance(block, dict) or block.get("type") != "tool_result":
        return block
    size = _block_chars(block)
    if size < PRUNE_MIN_CHARS:
        return block
    tool = names.get(str(block.get("tool_use_id")), "a tool")
    note = (
        f"[pruned: an older result of {tool} ({size} characters) is left out to save context;"
        " call the tool again if it is needed]"
    )
    return {**block, "content": note}


def choose_cut(messages: Sequence[Message], keep_turns: int, budget_chars: int) -> int:
    """The index of the first kept message: the last ``keep_turns`` user turns are kept,
    fewer while they are longer than ``budget_chars``; ``len(messages)`` with ``keep_turns``
    0 (everything is compacted). 0: there is nothing older to compact."""
    kept = _turn_starts(messages)[-keep_turns:] if keep_turns > 0 else []
    sizes = [message_chars(m) for m in messages]
    for start in kept:
        if sum(sizes[start:]) <= budget_chars:
            return start
    return len(messages)


def _render_block(block: Any, role: str, names: dict[str, str]) -> str:
    if not isinstance(block, dict):
        return str(block)
    kind = block.get("type")
    if kind == "text":
        return f"{role}: {block.get('text', '')}"
    if kind == "image":
        return f"{role}: [an image]"
    if kind == "tool_use":
        names[str(block.get("id"))] = str(block.get("name", "tool"))
        args = json.dumps(block.get("input") or {}, ensure_ascii=False)
        return f"Assistant called {block.get('name')} with {args[:RESULT_RENDER_CHARS]}"
    if kind == "tool_result":
        content = block.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        if len(text) > RESULT_RENDER_CHARS:
            text = text[:RESULT_RENDER_CHARS] + f" [...{len(text) - RESULT_RENDER_CHARS} more]"
        failed = " (error)" if block.get("is_error") else ""
        tool = names.get(str(block.get("tool_use_id")), "tool")
        return f"Result of {tool}{failed}: {text}"
    return f"{role}: [{kind}]"


def render(messages: Sequence[Message], max_chars: int) -> str:
    """The conversation as text ("User: ...", "Assistant: ...", tool calls and results cut
    short); past ``max_chars`` the middle is left out, the start and the most recent kept."""
    names: dict[str, str] = {}
    lines: list[str] = []
    for message in messages:
        role = "User" if message.get("role") == "user" else "Assistant"
        content = message.get("content")
        if isinstance(content, str):
            lines.append(f"{role}: {content}")
            continue
        lines.extend(_render_block(b, role, names) for b in content or [])
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    head = max_chars * 3 // 10
    tail = max_chars - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n[... {left_out} characters left out ...]\n{text[-tail:]}"
