"""Anthropic Messages API provider (``anthropic`` SDK, raw SSE events)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2  # the transport the anthropic SDK uses (its dependency)

from .base import (
    TRANSCRIPT_ONLY,
    ModelRequest,
    ModelResponse,
    TextDelta,
    Usage,
    get_field,
    parse_tool_arguments,
)
from .errors import (
    ModelError,
    ModelUnavailableError,
    error_for_status,
    retry_after_s,
    safe_detail,
)

__all__ = ["AnthropicModel", "AnthropicStreamAccumulator"]

_LABEL = "The Anthropic API"
# Prompt caching: a breakpoint on the stable system block and on the tools (Anthropic caches
# the prefix up to a breakpoint for 5 minutes; prefixes under its minimum are not cached).
CACHE_CONTROL = {"type": "ephemeral"}
_KEY_ENV = "ANTHROPIC_API_KEY"

# In-stream `event: error` arrives with HTTP 200; recover a status from the error type.
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def _input_tokens(usage: Any) -> int | None:
    """Total input tokens of an Anthropic usage object (uncached + cache writes + cache reads)."""
    base = get_field(usage, "input_tokens")
    if base is None:
        return None
    total = int(base)
    for extra in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        total += int(get_field(usage, extra) or 0)
    return total


class AnthropicStreamAccumulator:
    """Folds raw Messages-API stream events (SDK objects or plain dicts) into a ModelResponse.

    ``feed`` returns a TextDelta for text deltas and None otherwise; ``response()`` builds the
    final message. Only text and tool_use blocks are kept (thinking etc. are ignored).
    """

    def __init__(self, model: str = "") -> None:
        self.model = model
        self.stop_reason: str | None = None
        self.usage = Usage()
        self.finished = False
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}

    def feed(self, event: Any) -> TextDelta | None:
        kind = get_field(event, "type")
        if kind == "content_block_delta":
            index = int(get_field(event, "index", 0))
            delta = get_field(event, "delta")
            dkind = get_field(delta, "type")
            if dkind == "text_delta":
                text = get_field(delta, "text") or ""
                block = self._blocks.get(index)
                if block is None or block["type"] != "text":
                    block = self._blocks[index] = {"type": "text", "text": ""}
                block["text"] += text
                return TextDelta(text) if text else None
            if dkind == "input_json_delta":
                self._json.setdefault(index, []).append(get_field(delta, "partial_json") or "")
            return None
        if kind == "content_block_start":
            index = int(get_field(event, "index", 0))
            cb = get_field(event, "content_block")
            ckind = get_field(cb, "type")
            if ckind == "text":
                text = get_field(cb, "text") or ""
                self._blocks[index] = {"type": "text", "text": text}
                return TextDelta(text) if text else None
            if ckind == "tool_use":
                initial = get_field(cb, "input")
                self._blocks[index] = {
                    "type": "tool_use",
                    "id": get_field(cb, "id") or f"toolu_{index}",
                    "name": get_field(cb, "name") or "",
                    "input": dict(initial) if isinstance(initial, dict) else {},
                }
                self._json[index] = []
            return None
        if kind == "content_block_stop":
            self._finish_block(int(get_field(event, "index", 0)))
            return None
        if kind == "message_start":
            message = get_field(event, "message")
            self.model = get_field(message, "model") or self.model
            usage = get_field(message, "usage")
            if usage is not None:
                self.usage.input_tokens = _input_tokens(usage) or 0
                self.usage.output_tokens = int(get_field(usage, "output_tokens") or 0)
            return None
        if kind == "message_delta":
            reason = get_field(get_field(event, "delta"), "stop_reason")
            if reason:
                self.stop_reason = str(reason)
            usage = get_field(event, "usage")
            if usage is not None:
                out = get_field(usage, "output_tokens")
                if out is not None:
                    self.usage.output_tokens = int(out)  # cumulative, not additive
                inp = _input_tokens(usage)
                if inp is not None:
                    self.usage.input_tokens = inp
            return None
        if kind == "message_stop":
            self.finished = True
        return None  # ping and unknown events

    def _finish_block(self, index: int) -> None:
        parts = self._json.pop(index, None)
        block = self._blocks.get(index)
        if parts is None or block is None or block["type"] != "tool_use":
            return
        raw = "".join(parts)
        if raw.strip():
            block["input"] = parse_tool_arguments(raw)

    def response(self) -> ModelResponse:
        for index in list(self._json):
            self._finish_block(index)
        content: list[dict[str, Any]] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block["type"] == "text" and not block["text"]:
                continue  # the API rejects empty text blocks when they are sent back
            content.append(block)
        reason = self.stop_reason
        if reason is None:
            has_tools = any(b["type"] == "tool_use" for b in content)
            reason = "tool_use" if has_tools else "end_turn"
        return ModelResponse(
            content=content,
            stop_reason=reason,
            usage=Usage(self.usage.input_tokens, self.usage.output_tokens),
            model=self.model,
        )


def _to_anthropic_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical transcript -> Messages API (same shape; drop empty text blocks, copy)."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            blocks = [
                {k: v for k, v in b.items() if k not in TRANSCRIPT_ONLY}
                for b in content
                if not (b.get("type") == "text" and not b.get("text"))
            ]
            out.append({"role": msg["role"], "content": blocks})
        else:
            out.append({"role": msg["role"], "content": content})
    return out


def _system(text: str, stable_chars: int) -> str | list[dict[str, Any]]:
    """The ``system`` parameter: with a stable prefix, two text blocks, the first one marked
    for prompt caching (what changes every run, like the clock, comes after the mark)."""
    if stable_chars <= 0:
        return text
    stable, rest = text[:stable_chars].rstrip(), text[stable_chars:].strip()
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": stable, "cache_control": dict(CACHE_CONTROL)}
    ]
    if rest:
        blocks.append({"type": "text", "text": rest})
    return blocks


class AnthropicModel:
    """A Model backed by the Anthropic Messages API."""

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 120,
        *,
        max_retries: int = 2,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        self.model = model
        self._api_key = api_key
        self._client = client or anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=max_retries,
        )

    def __repr__(self) -> str:
        return f"AnthropicModel(model={self.model!r})"

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API parameters (without ``stream``) for a request."""
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": _to_anthropic_messages(request.messages),
        }
        if request.system:
            params["system"] = _system(request.system, request.cache_prefix_chars)
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
            if request.cache_prefix_chars > 0:  # the tools come first in the cached prefix
                params["tools"][-1]["cache_control"] = dict(CACHE_CONTROL)
        return params

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        params = self.request_params(request)
        acc = AnthropicStreamAccumulator(self.model)
        try:
            # The SDK's own POST (auth, retries, SSE parsing, `event: error`, status errors)
            # with the body we built, like messages.create; events stay plain dicts (the
            # accumulator reads both) instead of a pydantic model per event.
            events = await self._client.post(
                "/v1/messages",
                cast_to=anthropic.types.Message,
                body={**params, "stream": True},
                stream=True,
                stream_cls=anthropic.AsyncStream[object],
            )
            async with events:
                async for event in events:
                    delta = acc.feed(event)
                    if delta is not None:
                        yield delta
        except anthropic.AnthropicError as exc:
            raise self._map_error(exc) from None
        except httpx2.TransportError:
            # The SDK wraps a failed connection as APIConnectionError, but not one that drops
            # while the stream is read: that surfaced raw (no failover before any text; after
            # text, a lane retry that showed the partial answer again).
            raise ModelUnavailableError(
                f"{_LABEL} dropped the connection while it answered; try again.",
                provider=self.provider,
            ) from None
        if acc.stop_reason is None:
            raise ModelUnavailableError(
                f"{_LABEL} stream ended before the message was complete; try again.",
                provider=self.provider,
            )
        yield acc.response()

    def _map_error(self, exc: anthropic.AnthropicError) -> ModelError:
        if isinstance(exc, anthropic.APITimeoutError):
            return ModelUnavailableError(f"{_LABEL} timed out; try again.", provider=self.provider)
        if isinstance(exc, anthropic.APIConnectionError):
            return ModelUnavailableError(
                f"Could not connect to {_LABEL}; check the network and ANTHROPIC_BASE_URL.",
                provider=self.provider,
            )
        if isinstance(exc, anthropic.APIStatusError):
            body = exc.body
            error = get_field(body, "error") if isinstance(body, dict) else None
            etype = get_field(error, "type")
            message = get_field(error, "message") or exc.message
            status = exc.status_code
            if status < 400:  # an `event: error` inside a 200 stream
                status = _ERROR_TYPE_STATUS.get(str(etype), 500)
            return error_for_status(
                provider=self.provider,
                label=_LABEL,
                key_env=_KEY_ENV,
                status=status,
                detail=safe_detail(message, self._api_key),
                code=str(etype) if etype else None,
                retry_after=retry_after_s(exc.response.headers),
            )
        detail = safe_detail(getattr(exc, "message", None) or exc, self._api_key)
        return ModelError(f"{_LABEL} call failed: {detail}", provider=self.provider)
