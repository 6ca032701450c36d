"""Settings of compaction (compaction/compactor.py) and the context window of each model.

A model's window: ``SB_MODEL_CONTEXT`` (``{"provider:model" | "model": tokens}``) first, then
the table of known models below (matched by name prefix), then ``SB_CONTEXT_TOKENS``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from switchboard.settings import Settings

__all__ = ["KNOWN_WINDOWS", "CompactionSettings", "context_window"]

# (model name prefix, context window in tokens), most specific first; the providers' figures.
KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude-", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
)


def context_window(ref: str, overrides: dict[str, int], default: int) -> int:
    """The context window of ``ref`` (``provider:model``) in tokens."""
    name = ref.partition(":")[2] or ref
    for key in (ref, name):
        if key in overrides:
            return overrides[key]
    for prefix, tokens in KNOWN_WINDOWS:
        if name.startswith(prefix):
            return tokens
    return default


class CompactionSettings(Settings):
    # The context window of models neither SB_MODEL_CONTEXT nor the table knows (a local
    # model served with a small window: set it to that window).
    context_tokens: int = Field(default=128_000, ge=1_000)
    # {"provider:model" | "model": tokens}: a window per model, before the table.
    model_context: dict[str, Annotated[int, Field(ge=1_000)]] = Field(default_factory=dict)
    # Compact a session when a request would fill this share of the model's window.
    compaction: bool = True
    # The share of the model's window a request may fill before the session is compacted.
    compaction_threshold: float = Field(default=0.8, gt=0.1, le=1.0)
    # Recent user turns kept as they are (fewer when they alone fill 40% of the window).
    compaction_keep_turns: int = Field(default=4, ge=1, le=100)
    # Ask the model to store durable facts (memory_store) before summarising.
    compaction_flush: bool = True
    # Tool results older than this many user turns reach the model as a short note (0: never).
    prune_tool_results_after: int = Field(default=2, ge=0, le=1000)

    def window_of(self, ref: str) -> int:
        return context_window(ref, self.model_context, self.context_tokens)
