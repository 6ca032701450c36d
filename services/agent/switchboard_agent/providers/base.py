"""The model interface the agent loop talks to, independent of any provider SDK.

Transcripts use one canonical, Anthropic-shaped format::

    {"role": "user" | "assistant", "content": [block, ...]}

with blocks ``{"type": "text", "text": ...}``,
``{"type": "tool_use", "id": ..., "name": ..., "input": {...}}`` (assistant) and
``{"type": "tool_result", "tool_use_id": ..., "content": str, "is_error": bool}`` (user).
A stored ``tool_result`` may also hold the keys of :data:`TRANSCRIPT_ONLY` (the executor's
isolation attestation and timing, for the transcript's readers): a provider never sends them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from switchboard.toolspec import ToolSpec

# Keys of a stored tool_result block for the transcript's readers only (the Control UI): how
# the call was isolated and how long it took; providers drop them (strip_transcript_only).
TRANSCRIPT_ONLY = ("isolation", "duration_ms")

__all__ = [
    "TRANSCRIPT_ONLY",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "TextDelta",
    "Usage",
    "get_field",
    "parse_tool_arguments",
]


@dataclass
class ModelRequest:
    system: str
    messages: list[dict[str, Any]]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 4096
    # system[:cache_prefix_chars] stays the same from run to run (identity, workspace files):
    # a provider may cache it (Anthropic's cache_control); 0: nothing is marked.
    cache_prefix_chars: int = 0


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class TextDelta:
    text: str


@dataclass
class ModelResponse:
    content: list[dict[str, Any]]  # text and tool_use blocks, in order
    stop_reason: str  # "end_turn" | "tool_use" | "max_tokens" | other, normalized
    usage: Usage
    model: str

    @property
    def text(self) -> str:
        """All text blocks joined."""
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]


@runtime_checkable
class Model(Protocol):
    provider: str  # "anthropic" | "openai"
    model: str

    def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        """Yield TextDeltas as they arrive, then exactly one ModelResponse, last.

        Raises :class:`~switchboard_agent.providers.errors.ModelError` subclasses.
        """
        ...


def get_field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for mappings, ``obj.name`` otherwise (SDK models); None-safe."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def parse_tool_arguments(raw: str) -> dict[str, Any]:
    """Parse a model-produced JSON tool input; empty -> {}, invalid/non-object -> {"_raw": raw}."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    if not isinstance(value, dict):
        return {"_raw": raw}
    return value
