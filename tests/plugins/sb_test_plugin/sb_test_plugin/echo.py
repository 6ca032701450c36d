"""``sbecho``: the model provider ``echo``, no network. ``echo:<name>`` answers
``echo(<name>): <the last user text>``, streamed in two deltas; ``echo:fail`` raises a plain
``RuntimeError`` on every call (the agent must treat it as an outage and fail over).
``sbbadprov``: the provider ``badprov``, whose factory raises."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from switchboard_agent.plugins.api import (
    AgentPluginApi,
    Manifest,
    ModelRequest,
    ModelResponse,
    TextDelta,
    Usage,
)


def last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if b.get("type") == "text"]
        if texts:
            return texts[-1]
    return ""


class EchoModel:
    provider = "echo"

    def __init__(self, model: str, prefix: str) -> None:
        self.model = model
        self.prefix = prefix

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        if self.model == "fail":
            raise RuntimeError("the echo model was told to fail")
        text = f"{self.prefix}({self.model}): {last_user_text(request)}"
        half = len(text) // 2
        yield TextDelta(text[:half])
        yield TextDelta(text[half:])
        content = [{"type": "text", "text": text}]
        yield ModelResponse(content, "end_turn", Usage(len(text), len(text)), self.model)


class EchoPlugin:
    manifest = Manifest(
        "sbecho",
        "0.2.0",
        frozenset({"providers"}),
        config_schema={"type": "object", "properties": {"prefix": {"type": "string"}}},
    )

    def setup(self, api: AgentPluginApi) -> None:
        prefix = str(api.config.get("prefix", "echo"))

        def factory(model: str, config: Mapping[str, Any]) -> EchoModel:
            return EchoModel(model, prefix)

        api.register_provider("echo", factory)


class BadProviderPlugin:
    manifest = Manifest("sbbadprov", "0.1.0", frozenset({"providers"}))

    def setup(self, api: AgentPluginApi) -> None:
        def factory(model: str, config: Mapping[str, Any]) -> EchoModel:
            raise RuntimeError("badprov cannot make models")

        api.register_provider("badprov", factory)


plugin = EchoPlugin()
bad_provider = BadProviderPlugin()
