"""Model providers: one small streaming interface over the Anthropic and OpenAI SDKs.

    cfg = resolve_model_config(env.SB_MODEL, env.ANTHROPIC_API_KEY, ...)
    model = build_model(cfg)            # or reply NO_MODEL_MESSAGE when cfg is None
    async for item in model.stream(ModelRequest(system, messages, tools)):
        ...                             # TextDelta..., then one ModelResponse

The SDK-backed classes are imported lazily (importing the ``anthropic`` SDK takes over a
second), so only the configured provider's SDK gets loaded.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import Model, ModelRequest, ModelResponse, TextDelta, Usage
from .errors import (
    ModelAuthError,
    ModelContextOverflowError,
    ModelError,
    ModelRateLimitError,
    ModelUnavailableError,
)
from .select import NO_MODEL_MESSAGE, ModelConfig, build_model, resolve_model_config

if TYPE_CHECKING:
    from .anthropic import AnthropicModel, AnthropicStreamAccumulator
    from .openai import OpenAIChatModel, OpenAIStreamAccumulator, to_openai_messages

__all__ = [
    "NO_MODEL_MESSAGE",
    "AnthropicModel",
    "AnthropicStreamAccumulator",
    "Model",
    "ModelAuthError",
    "ModelConfig",
    "ModelContextOverflowError",
    "ModelError",
    "ModelRateLimitError",
    "ModelRequest",
    "ModelResponse",
    "ModelUnavailableError",
    "OpenAIChatModel",
    "OpenAIStreamAccumulator",
    "TextDelta",
    "Usage",
    "build_model",
    "resolve_model_config",
    "to_openai_messages",
]

_LAZY = {
    "AnthropicModel": ".anthropic",
    "AnthropicStreamAccumulator": ".anthropic",
    "OpenAIChatModel": ".openai",
    "OpenAIStreamAccumulator": ".openai",
    "to_openai_messages": ".openai",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
