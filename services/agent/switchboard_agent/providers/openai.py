"""OpenAI-compatible Chat Completions provider (``openai`` SDK).

Works with OpenAI and anything that speaks the same API by base URL (OpenRouter, Ollama, vLLM,
Groq, ...). Canonical (Anthropic-shaped) transcripts are converted to chat messages here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from .base import (
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
from .openai_body import dumps, to_openai_messages, to_openai_tools, tool_json

__all__ = [
    "OpenAIChatModel",
    "OpenAIStreamAccumulator",
    "normalize_finish_reason",
    "to_openai_messages",
    "to_openai_tools",
]

_LABEL = "The OpenAI-compatible API"
_KEY_ENV = "OPENAI_API_KEY"

_FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def normalize_finish_reason(finish_reason: str | None, has_tool_calls: bool) -> str:
    """OpenAI finish_reason -> our stop_reason vocabulary (Anthropic's).

    Some compatible servers answer "stop" (or nothing) even when they return tool calls; a
    response that carries tool calls is always "tool_use" unless it was cut off by length.
    """
    reason = _FINISH_REASONS.get(finish_reason or "", finish_reason or "end_turn")
    if has_tool_calls and reason == "end_turn":
        return "tool_use"
    return reason


class OpenAIStreamAccumulator:
    """Folds ``chat.completion.chunk`` objects (SDK objects or plain dicts) into a ModelResponse.

    Tool-call deltas are merged by ``index``: id and name come in the first delta, the
    arguments string is split across many. Only choice 0 is read.
    """

    def __init__(self, model: str = "") -> None:
        self.model = model
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.saw_usage = False
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._last_index: int | None = None

    def feed(self, chunk: Any) -> TextDelta | None:
        model = get_field(chunk, "model")
        if model:
            self.model = model
        usage = get_field(chunk, "usage")
        if usage is not None:
            self.saw_usage = True
            self.usage.input_tokens = int(get_field(usage, "prompt_tokens") or 0)
            self.usage.output_tokens = int(get_field(usage, "completion_tokens") or 0)
        pieces: list[str] = []
        for choice in get_field(chunk, "choices") or ():
            if int(get_field(choice, "index", 0) or 0) != 0:
                continue
            delta = get_field(choice, "delta")
            if delta is not None:
                for key in ("content", "refusal"):
                    text = get_field(delta, key)
                    if text:
                        pieces.append(text)
                for call in get_field(delta, "tool_calls") or ():
                    self._feed_tool_call(call)
            reason = get_field(choice, "finish_reason")
            if reason:
                self.finish_reason = str(reason)
        if not pieces:
            return None
        text = "".join(pieces)
        self._text.append(text)
        return TextDelta(text)

    def _feed_tool_call(self, call: Any) -> None:
        call_id = get_field(call, "id")
        index = get_field(call, "index")
        if index is None:  # non-conforming servers: a new id starts a new call
            fresh = call_id or self._last_index is None
            index = len(self._calls) if fresh else self._last_index
        index = int(index)
        self._last_index = index
        entry = self._calls.setdefault(index, {"id": None, "name": "", "args": []})
        if call_id:
            entry["id"] = call_id
        function = get_field(call, "function")
        name = get_field(function, "name")
        if name:
            entry["name"] = name
        args = get_field(function, "arguments")
        if isinstance(args, dict):  # some servers send an object instead of a JSON string
            args = json.dumps(args)
        if args:
            entry["args"].append(args)

    def response(self) -> ModelResponse:
        content: list[dict[str, Any]] = []
        text = "".join(self._text)
        if text:
            content.append({"type": "text", "text": text})
        for index in sorted(self._calls):
            entry = self._calls[index]
            content.append(
                {
                    "type": "tool_use",
                    "id": entry["id"] or f"call_{uuid.uuid4().hex[:24]}",
                    "name": entry["name"],
                    "input": parse_tool_arguments("".join(entry["args"])),
                }
            )
        return ModelResponse(
            content=content,
            stop_reason=normalize_finish_reason(self.finish_reason, bool(self._calls)),
            usage=Usage(self.usage.input_tokens, self.usage.output_tokens),
            model=self.model,
        )


class OpenAIChatModel:
    """A Model backed by an OpenAI-compatible Chat Completions endpoint."""

    provider = "openai"

    def __init__(
        self,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 120,
        *,
        max_retries: int = 2,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self.model = model
        self._api_key = api_key
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=max_retries,
        )
        # OpenAI's own API wants max_completion_tokens (newer models reject max_tokens);
        # compatible servers (Ollama, vLLM, older proxies) reliably understand max_tokens.
        self._official = "api.openai.com" in str(self._client.base_url)

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r})"

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The chat.completions parameters (without ``stream``) for a request."""
        params = self._params(request)
        if request.tools:
            params["tools"] = to_openai_tools(request)
        return params

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.system, request.messages),
        }
        params["max_completion_tokens" if self._official else "max_tokens"] = request.max_tokens
        return params

    def stream_body(self, request: ModelRequest) -> bytes:
        """The streaming request's JSON body: :meth:`request_params` with ``stream``, the tool
        schemas spliced in as each spec encoded them once (they are most of its bytes)."""
        params = self._params(request)
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}
        body = dumps(params)
        if request.tools:
            tools = ",".join(tool_json(t) for t in request.tools)
            body = f'{body[:-1]},"tools":[{tools}]}}'
        return body.encode()

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        content = self.stream_body(request)
        acc = OpenAIStreamAccumulator(self.model)
        try:
            # The body is encoded already; the SDK's own POST (auth, retries, SSE parsing,
            # errors) without create()'s per-call param transform, which walks the whole
            # transcript and was ~40% of the agent's CPU. Chunks stay plain dicts (the
            # accumulator reads both): building a pydantic model per chunk was ~15% more.
            chunks = await self._client.post(
                "/chat/completions",
                cast_to=ChatCompletion,
                content=content,
                options={"security": {"bearer_auth": True}},
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
            async with chunks:
                async for chunk in chunks:
                    delta = acc.feed(chunk)
                    if delta is not None:
                        yield delta
        except openai.OpenAIError as exc:
            raise self._map_error(exc) from None
        if acc.finish_reason is None and not acc.saw_usage:
            raise ModelUnavailableError(
                f"{_LABEL} stream ended before the response was complete; try again.",
                provider=self.provider,
            )
        yield acc.response()

    def _map_error(self, exc: openai.OpenAIError) -> ModelError:
        if isinstance(exc, openai.APITimeoutError):
            return ModelUnavailableError(f"{_LABEL} timed out; try again.", provider=self.provider)
        if isinstance(exc, openai.APIConnectionError):
            return ModelUnavailableError(
                f"Could not connect to {_LABEL}; check the network and OPENAI_BASE_URL.",
                provider=self.provider,
            )
        if isinstance(exc, openai.APIError):
            body = exc.body  # the "error" object of the response, when there was one
            message = get_field(body, "message") if isinstance(body, dict) else None
            code = exc.code or exc.type
            headers = None
            if isinstance(exc, openai.APIStatusError):
                status = exc.status_code
                headers = exc.response.headers
            else:  # an error object inside a 200 stream (OpenRouter puts the HTTP code there)
                raw_code = get_field(body, "code") if isinstance(body, dict) else None
                status = raw_code if isinstance(raw_code, int) and raw_code >= 400 else 500
            return error_for_status(
                provider=self.provider,
                label=_LABEL,
                key_env=_KEY_ENV,
                status=status,
                detail=safe_detail(message or exc.message, self._api_key),
                code=code,
                retry_after=retry_after_s(headers),
            )
        detail = safe_detail(exc, self._api_key)
        return ModelError(f"{_LABEL} call failed: {detail}", provider=self.provider)
