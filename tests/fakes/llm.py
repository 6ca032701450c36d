"""A scripted fake LLM server speaking the Anthropic Messages and OpenAI Chat Completions wire
formats, for tests and benchmarks. Our code reaches it through the official SDKs by base URL::

    with FakeLLM(tool_then_text()) as llm:
        anthropic.AsyncAnthropic(api_key="k", base_url=llm.base_url)
        openai.AsyncOpenAI(api_key="k", base_url=f"{llm.base_url}/v1")
        ...
        assert llm.calls[0].request.tools == ["get_time"]

Endpoints: ``POST /v1/messages`` (JSON or ``stream: true`` SSE), ``POST /v1/chat/completions``
(JSON or ``stream: true`` chunks ending with ``data: [DONE]``), ``GET /v1/models``. Answers are
instant: every streamed response is written at once unless ``stream_delay_s`` is set. Failures
are scripted with ``fail_next`` (an HTTP error, or an error at the start of a 200 stream),
``overflow_next`` and ``break_stream_next`` (text deltas, then a dropped connection or an error
event: a stream that fails after text reached the client).

Standalone: ``python -m tests.fakes.llm --port 8999 [--script tool_then_text|text_only|echo]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.llm_images import image_problem

__all__ = [
    "FakeLLM",
    "FakeRequest",
    "RecordedCall",
    "Reply",
    "Script",
    "echo",
    "text_only",
    "tool_then_text",
]

log = logging.getLogger(__name__)

DEFAULT_MODELS = ("claude-sonnet-4-5", "gpt-4o-mini")


# --------------------------------------------------------------------------- scripting


@dataclass(frozen=True)
class FakeRequest:
    """A provider-neutral view of one incoming model request."""

    provider: str  # "anthropic" | "openai"
    model: str
    tools: list[str]  # names of the tools offered
    last_tool_results: list[str]  # tool result contents of the final turn ([] if none)
    last_user_text: str  # text of the most recent user message that has text
    system: str
    stream: bool
    body: dict[str, Any]  # the raw JSON body

    @property
    def raw(self) -> dict[str, Any]:
        return self.body

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return messages if isinstance(messages, list) else []


@dataclass
class Reply:
    """What the fake model answers: text, then tool calls ``(name, input)``."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # Canonical stop reason ("end_turn" | "tool_use" | "max_tokens" | ...), translated to the
    # provider's vocabulary; None -> "tool_use" when there are tool calls, else "end_turn".
    stop_reason: str | None = None
    input_tokens: int | None = None  # None -> estimated from the request size
    output_tokens: int | None = None  # None -> estimated from the reply size


Script = Callable[[FakeRequest], Reply]


@dataclass(frozen=True)
class RecordedCall:
    provider: str
    start: float  # time.monotonic() when the request arrived
    end: float  # time.monotonic() when the response was complete
    request: FakeRequest
    reply: Reply  # Reply() for rejected calls; Reply(text=<what streamed>) for broken streams
    # The HTTP status, or the error's inside a 200 stream; 0: the connection dropped mid-stream.
    status: int = 200


def tool_then_text(tool: str = "get_time", args: dict[str, Any] | None = None) -> Script:
    """No tool results in the last turn -> call ``tool``; else "Tool said: <results>"."""
    tool_args = {"timezone": "UTC"} if args is None else args

    def script(req: FakeRequest) -> Reply:
        if req.last_tool_results:
            return Reply(text="Tool said: " + " ".join(req.last_tool_results))
        return Reply(tool_calls=[(tool, dict(tool_args))])

    return script


def text_only(text: str = "Hello from the fake model.") -> Script:
    """Always answer ``text``."""

    def script(req: FakeRequest) -> Reply:
        return Reply(text=text)

    return script


def echo() -> Script:
    """Answer "You said: <last user text>"."""

    def script(req: FakeRequest) -> Reply:
        return Reply(text=f"You said: {req.last_user_text}")

    return script


# --------------------------------------------------------------------------- request parsing


def _block_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and b.get("text")
        )
    return str(content)


def _parse_anthropic(body: dict[str, Any]) -> FakeRequest:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    tool_results: list[str] = []
    if messages and messages[-1].get("role") == "user":
        content = messages[-1].get("content")
        if isinstance(content, list):
            tool_results = [
                _block_text(b.get("content"))
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
    user_text = ""
    for m in reversed(messages):
        if m.get("role") == "user":
            user_text = _block_text(m.get("content"))
            if user_text:
                break
    return FakeRequest(
        provider="anthropic",
        model=str(body.get("model", "")),
        tools=[str(t.get("name", "")) for t in body.get("tools") or [] if isinstance(t, dict)],
        last_tool_results=tool_results,
        last_user_text=user_text,
        system=_block_text(body.get("system")),
        stream=bool(body.get("stream")),
        body=body,
    )


def _cache_marks(body: dict[str, Any]) -> list[Any]:
    """Every ``cache_control`` of an Anthropic request (tools, system blocks, message blocks)."""
    blocks: list[Any] = list(body.get("tools") or [])
    if isinstance(body.get("system"), list):
        blocks += body["system"]
    for m in body.get("messages") or []:
        if isinstance(m, dict) and isinstance(m.get("content"), list):
            blocks += m["content"]
    return [b["cache_control"] for b in blocks if isinstance(b, dict) and "cache_control" in b]


def _anthropic_invalid(body: dict[str, Any]) -> str | None:
    """What the Messages API refuses (400) in the parts our client shapes: system blocks and
    prompt-caching marks."""
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            if not isinstance(block, dict) or block.get("type") != "text":
                return "system: each block must be a text block"
            if not block.get("text"):
                return "system: text content blocks must be non-empty"
    marks = _cache_marks(body)
    if len(marks) > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {len(marks)}."
    for mark in marks:
        if not isinstance(mark, dict) or mark.get("type") != "ephemeral":
            return "cache_control.type: Input should be 'ephemeral'"
    return None


def _parse_openai(body: dict[str, Any]) -> FakeRequest:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    tool_results: list[str] = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        tool_results.insert(0, _block_text(m.get("content")))
    user_text = ""
    for m in reversed(messages):
        if m.get("role") == "user":
            user_text = _block_text(m.get("content"))
            if user_text:
                break
    tools: list[str] = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            fn = t.get("function")
            tools.append(str((fn if isinstance(fn, dict) else t).get("name", "")))
    system = "\n".join(
        _block_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
    )
    return FakeRequest(
        provider="openai",
        model=str(body.get("model", "")),
        tools=tools,
        last_tool_results=tool_results,
        last_user_text=user_text,
        system=system,
        stream=bool(body.get("stream")),
        body=body,
    )


# --------------------------------------------------------------------------- wire formats


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _split(s: str, parts: int) -> list[str]:
    """``s`` in up to ``parts`` consecutive pieces (split anywhere, as tokens are)."""
    if parts <= 1 or len(s) <= 1:
        return [s]
    size = -(-len(s) // min(parts, len(s)))
    return [s[i : i + size] for i in range(0, len(s), size)]


def _hex() -> str:
    return uuid.uuid4().hex[:24]


@dataclass
class _Answer:
    """A Reply resolved for the wire: ids, usage and JSON arguments fixed."""

    text: str
    calls: list[tuple[str, str, str]]  # (id, name, arguments JSON)
    stop_reason: str
    input_tokens: int
    output_tokens: int


def _resolve(reply: Reply, provider: str, body_size: int) -> _Answer:
    prefix = "toolu_" if provider == "anthropic" else "call_"
    calls = [(prefix + _hex(), name, _dumps(args)) for name, args in reply.tool_calls]
    stop = reply.stop_reason or ("tool_use" if calls else "end_turn")
    out_chars = len(reply.text) + sum(len(c[1]) + len(c[2]) for c in calls)
    return _Answer(
        text=reply.text,
        calls=calls,
        stop_reason=stop,
        input_tokens=reply.input_tokens
        if reply.input_tokens is not None
        else max(1, body_size // 4),
        output_tokens=reply.output_tokens
        if reply.output_tokens is not None
        else max(1, out_chars // 4),
    )


def _anthropic_message(a: _Answer, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if a.text:
        content.append({"type": "text", "text": a.text})
    for call_id, name, args in a.calls:
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": json.loads(args)})
    return {
        "id": "msg_" + _hex(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": a.stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": a.input_tokens, "output_tokens": a.output_tokens},
    }


def _anthropic_events(a: _Answer, model: str, text_chunks: int, arg_chunks: int) -> list[str]:
    def ev(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {_dumps(data)}\n\n"

    events = [
        ev(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_" + _hex(),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": a.input_tokens, "output_tokens": 1},
                },
            },
        )
    ]
    index = 0
    if a.text:
        events.append(
            ev(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        events.append(ev("ping", {"type": "ping"}))
        for piece in _split(a.text, text_chunks):
            events.append(
                ev(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            )
        events.append(ev("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call_id, name, args in a.calls:
        events.append(
            ev(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                },
            )
        )
        for piece in ["", *_split(args, arg_chunks)]:
            events.append(
                ev(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        events.append(ev("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(
        ev(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": a.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": a.output_tokens},
            },
        )
    )
    events.append(ev("message_stop", {"type": "message_stop"}))
    return events


_OPENAI_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _openai_usage(a: _Answer) -> dict[str, int]:
    return {
        "prompt_tokens": a.input_tokens,
        "completion_tokens": a.output_tokens,
        "total_tokens": a.input_tokens + a.output_tokens,
    }


def _openai_completion(a: _Answer, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": a.text or None, "refusal": None}
    if a.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in a.calls
        ]
    return {
        "id": "chatcmpl-" + _hex(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _OPENAI_FINISH.get(a.stop_reason, a.stop_reason),
            }
        ],
        "usage": _openai_usage(a),
    }


def _openai_chunks(
    a: _Answer, model: str, include_usage: bool, text_chunks: int, arg_chunks: int
) -> list[str]:
    chunk_id = "chatcmpl-" + _hex()
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        data: dict[str, Any] = {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            data["usage"] = None
        return f"data: {_dumps(data)}\n\n"

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if a.text:
        out.extend(chunk({"content": piece}) for piece in _split(a.text, text_chunks))
    for i, (cid, name, args) in enumerate(a.calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": cid,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        out.extend(
            chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            for piece in _split(args, arg_chunks)
        )
    out.append(chunk({}, _OPENAI_FINISH.get(a.stop_reason, a.stop_reason)))
    if include_usage:
        final = {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [],
            "usage": _openai_usage(a),
        }
        out.append(f"data: {_dumps(final)}\n\n")
    out.append("data: [DONE]\n\n")
    return out


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_OPENAI_ERRORS = {  # status -> (type, code)
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
_OPENAI_ERRORS[500] = ("server_error", None)
_OPENAI_ERRORS[503] = ("server_error", None)
_DEFAULT_MESSAGES = {
    400: "Invalid request.",
    401: "Invalid API key.",
    403: "Permission denied.",
    404: "Not found.",
    429: "Rate limit reached; please retry shortly.",
    500: "Internal server error.",
    503: "The server is overloaded or not ready yet.",
    529: "Overloaded",
}
# What each provider answers (HTTP 400) when the request does not fit the context window.
_OVERFLOW = {
    "anthropic": ("prompt is too long: 208746 tokens > 200000 maximum", None),
    "openai": (
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 131072 tokens. Please reduce the length of the messages.",
        "context_length_exceeded",
    ),
}


def _error_body(provider: str, status: int, text: str, code: str | None = None) -> dict[str, Any]:
    if provider == "anthropic":
        etype = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": etype, "message": text}}
    etype, default_code = _OPENAI_ERRORS.get(status, ("server_error", None))
    param = "messages" if code == "context_length_exceeded" else None
    return {"error": {"message": text, "type": etype, "param": param, "code": code or default_code}}


def _stream_error_event(provider: str, status: int, text: str) -> str:
    """The error a provider writes into a 200 stream: Anthropic's ``event: error``; the OpenAI
    SDK's error chunk, with the HTTP code in ``code`` as OpenRouter sends it."""
    if provider == "anthropic":
        return f"event: error\ndata: {_dumps(_error_body(provider, status, text))}\n\n"
    return f"data: {_dumps({'error': {'message': text, 'code': status}})}\n\n"


def _stream_head(provider: str, model: str, text: str, text_chunks: int) -> list[str]:
    """A normal stream of ``text`` up to just before its end (Anthropic: no ``message_delta``
    nor ``message_stop``; OpenAI: no finish chunk nor ``[DONE]``): what a client has read when
    the stream breaks. Without text: only the stream's start."""
    answer = _Answer(text=text, calls=[], stop_reason="end_turn", input_tokens=1, output_tokens=1)
    if provider == "anthropic":
        return _anthropic_events(answer, model, text_chunks, 1)[:-2]
    return _openai_chunks(answer, model, False, text_chunks, 1)[:-2]


class _StreamCut(Exception):
    """Raised by a response that breaks its stream: uvicorn then closes the connection
    without the end of the chunked body, as a dropped connection looks to the client."""


class _QuietCuts(logging.Filter):
    """Keeps uvicorn from logging our deliberate cuts as application errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _StreamCut))


_QUIET_CUTS = _QuietCuts()


class _CutResponse(Response):
    """HTTP 200, ``head`` as the first chunks of an event stream, then the connection drops."""

    def __init__(self, head: str, headers: dict[str, str]) -> None:
        super().__init__(None, media_type="text/event-stream", headers=headers)
        # No content-length: the body is chunked, so a close before its last chunk is a drop.
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.head = head.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.head, "more_body": True})
        raise _StreamCut("the fake LLM dropped the connection mid-stream (scripted)")


def _in_stream_error(provider: str, status: int, text: str) -> list[str]:
    """A 200 stream that fails at its start: Anthropic's ``event: error`` after
    ``message_start``; the OpenAI SDK's error chunk, with the HTTP code in ``code`` as
    OpenRouter sends it."""
    if provider == "anthropic":
        start = {
            "type": "message_start",
            "message": {
                "id": "msg_" + _hex(),
                "type": "message",
                "role": "assistant",
                "model": "",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        }
        return [
            f"event: message_start\ndata: {_dumps(start)}\n\n",
            _stream_error_event(provider, status, text),
        ]
    return [_stream_error_event(provider, status, text)]


def _error_response(
    provider: str,
    status: int,
    message: str | None,
    *,
    code: str | None = None,
    retry_after: float | None = None,
    retry_header: bool = True,
) -> Response:
    """The provider's error response; a 429 or 5xx carries ``retry-after-ms: 1`` unless
    ``retry_after`` (seconds) is given or ``retry_header`` is False (no header at all)."""
    text = message or _DEFAULT_MESSAGES.get(status, f"HTTP {status}")
    retryable = retry_header and (status == 429 or status >= 500)
    headers = {"retry-after-ms": "1"} if retryable else {}
    if retry_after is not None:  # what the APIs send: whole seconds in retry-after
        headers = {"retry-after": f"{retry_after:g}"}
    body = _error_body(provider, status, text, code)
    if provider == "anthropic":
        request_id = "req_" + _hex()
        headers["request-id"] = request_id
        body["request_id"] = request_id
    return JSONResponse(body, status_code=status, headers=headers)


# --------------------------------------------------------------------------- server


@dataclass
class _Failure:
    status: int
    message: str | None
    provider: str | None
    model: str | None = None  # only calls of this model
    key: str | None = None  # only calls with this API key
    retry_after: float | None = None  # a retry-after header (seconds)
    in_stream: bool = False  # HTTP 200 and the error inside the stream
    code: str | None = None  # OpenAI's error code
    partial: str | None = None  # a broken stream: this text streams first, then the break
    drop: bool = False  # a broken stream ends with a dropped connection, not an error event
    retry_header: bool = True  # False: no retry-after header at all

    def matches(self, provider: str, model: str, key: str) -> bool:
        return (
            self.provider in (None, provider)
            and self.model in (None, model)
            and self.key in (None, key)
        )


class FakeLLM:
    """Scripted fake Anthropic + OpenAI server on 127.0.0.1 (a uvicorn thread).

    ``require_key``: answer 401 (in the provider's error shape) unless the request carries this
    key (``x-api-key`` or ``Authorization: Bearer``). ``stream_delay_s``: pause between streamed
    events (default 0: the whole stream is written at once). ``text_chunks``/``arg_chunks``:
    into how many deltas text and tool arguments are split. ``threaded``: run the script in a
    worker thread, so that it may block (e.g. a handshake that only requests in flight at the
    same time can pass); it must then be thread-safe.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        require_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        models: tuple[str, ...] | list[str] = DEFAULT_MODELS,
        stream_delay_s: float = 0.0,
        text_chunks: int = 4,
        arg_chunks: int = 3,
        threaded: bool = False,
    ) -> None:
        self.script: Script = script or tool_then_text()
        self.threaded = threaded
        self.require_key = require_key
        self.host = host
        self.port = port
        self.models = list(models)
        self.stream_delay_s = stream_delay_s
        self.text_chunks = text_chunks
        self.arg_chunks = arg_chunks
        self.errors: list[BaseException] = []  # exceptions raised by the script
        self._calls: list[RecordedCall] = []
        self._failures: list[_Failure] = []
        self._cond = threading.Condition()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    # ---- public helpers

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (Anthropic base URL; OpenAI's is ``base_url + "/v1"``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def calls(self) -> list[RecordedCall]:
        """A snapshot of every recorded model call, in arrival order of completion."""
        with self._cond:
            return list(self._calls)

    def reset(self) -> None:
        with self._cond:
            self._calls.clear()
            self._failures.clear()
            self.errors.clear()

    def fail_next(
        self,
        status: int,
        n: int = 1,
        *,
        message: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        key: str | None = None,
        retry_after: float | None = None,
        in_stream: bool = False,
        retry_header: bool = True,
    ) -> None:
        """Answer the next ``n`` model calls (of ``provider``, ``model`` and API ``key``, or
        any) with HTTP ``status`` in the provider's error shape; ``retry_after`` sends that
        header (seconds); without it a 429 or 5xx carries ``retry-after-ms: 1``, or no such
        header at all when ``retry_header`` is False; ``in_stream`` answers a streaming call
        200 and fails inside the stream instead (Anthropic's ``event: error``, an OpenAI error
        chunk)."""
        failure = _Failure(
            status, message, provider, model, key, retry_after, in_stream, retry_header=retry_header
        )
        with self._cond:
            self._failures.extend(failure for _ in range(n))

    def break_stream_next(
        self,
        n: int = 1,
        *,
        text: str = "Partial answer ",
        status: int | None = None,
        message: str | None = None,
        provider: str | None = None,
        model: str | None = None,
        key: str | None = None,
    ) -> None:
        """Answer the next ``n`` streaming calls (of ``provider``, ``model`` and API ``key``, or
        any) 200, stream ``text`` as text deltas ("" for none), then break the stream: with
        ``status`` None the connection drops (no end of the body; recorded with status 0),
        else an error of that status arrives inside the stream (Anthropic's ``event: error``,
        an OpenAI error chunk). A non-streaming call gets the HTTP error (500 for a drop)."""
        failure = _Failure(
            status or 500,
            message,
            provider,
            model,
            key,
            in_stream=True,
            partial=text,
            drop=status is None,
        )
        with self._cond:
            self._failures.extend(failure for _ in range(n))

    def overflow_next(
        self, n: int = 1, *, provider: str | None = None, model: str | None = None
    ) -> None:
        """Answer the next ``n`` calls with the provider's own context-length error (400)."""
        with self._cond:
            for _ in range(n):
                for name, (text, code) in _OVERFLOW.items():
                    if provider in (None, name):
                        self._failures.append(_Failure(400, text, name, model, code=code))

    def wait_for_calls(self, n: int, timeout: float = 5.0) -> list[RecordedCall]:
        """Block until at least ``n`` calls are recorded; raise TimeoutError otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._calls) >= n, timeout):
                raise TimeoutError(f"expected {n} model calls, got {len(self._calls)}")
            return list(self._calls)

    # ---- lifecycle

    def _make_server(self) -> uvicorn.Server:
        config = uvicorn.Config(
            self.app,
            host=self.host,
            port=self.port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http="h11",
            timeout_graceful_shutdown=2,
            # Providers keep idle connections open for a minute or more. uvicorn's 5 s default
            # equals httpx's pool expiry, so an SDK could send a request on a connection the
            # fake was closing: a connection error no real provider gives (seen under load).
            timeout_keep_alive=75,
        )
        error_log = logging.getLogger("uvicorn.error")  # after Config set up uvicorn's logging
        if _QUIET_CUTS not in error_log.filters:
            error_log.addFilter(_QUIET_CUTS)
        return uvicorn.Server(config)

    def start(self) -> FakeLLM:
        sock = self._bind()
        server = self._server = self._make_server()
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="fake-llm", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake LLM server failed to start")
            time.sleep(0.002)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def _bind(self) -> socket.socket:
        # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose proto
        # is TCP, and without it every response waits ~40 ms for a delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        return sock

    def serve_forever(self, on_ready: Callable[[FakeLLM], None] | None = None) -> None:
        """Run in the current thread until interrupted (Ctrl-C)."""
        sock = self._bind()
        if on_ready is not None:
            on_ready(self)
        self._make_server().run(sockets=[sock])

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- handlers

    def _record(self, call: RecordedCall) -> None:
        with self._cond:
            self._calls.append(call)
            self._cond.notify_all()

    def _take_failure(self, provider: str, model: str, key: str) -> _Failure | None:
        with self._cond:
            for i, failure in enumerate(self._failures):
                if failure.matches(provider, model, key):
                    return self._failures.pop(i)
        return None

    def _authorized(self, request: Request, provider: str) -> tuple[bool, str]:
        """Whether the call may pass, and the API key it carries."""
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else ""
        given = bearer
        if provider == "anthropic":
            given = request.headers.get("x-api-key") or bearer
        return self.require_key is None or given == self.require_key, given

    async def _handle(self, request: Request, provider: str) -> Response:
        start = time.monotonic()
        raw = await request.body()
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
        except ValueError as exc:
            return _error_response(provider, 400, f"Invalid JSON body: {exc}")
        fake = _parse_anthropic(body) if provider == "anthropic" else _parse_openai(body)

        def reject(
            status: int,
            message: str | None,
            code: str | None = None,
            retry_after: float | None = None,
            retry_header: bool = True,
        ) -> Response:
            self._record(RecordedCall(provider, start, time.monotonic(), fake, Reply(), status))
            return _error_response(
                provider,
                status,
                message,
                code=code,
                retry_after=retry_after,
                retry_header=retry_header,
            )

        ok, given = self._authorized(request, provider)
        if not ok:
            if provider == "anthropic":
                return reject(401, "invalid x-api-key")
            masked = f"{given[:3]}{'*' * 8}{given[-4:]}" if len(given) > 8 else "***"
            return reject(
                401,
                f"Incorrect API key provided: {masked}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
            )
        if provider == "anthropic":  # Anthropic checks its requests' shape as the API does
            invalid = _anthropic_invalid(body) or image_problem(body)
            if invalid is not None:
                return reject(400, invalid)
        failure = self._take_failure(provider, fake.model, given)
        if failure is not None and failure.partial is not None and fake.stream:
            return self._broken(failure, fake, start)
        if failure is not None and failure.in_stream and fake.stream:
            self._record(
                RecordedCall(provider, start, time.monotonic(), fake, Reply(), failure.status)
            )
            text = failure.message or _DEFAULT_MESSAGES.get(failure.status, "error")
            return Response(
                "".join(_in_stream_error(provider, failure.status, text)),
                media_type="text/event-stream",
            )
        if failure is not None:
            return reject(
                failure.status,
                failure.message,
                failure.code,
                failure.retry_after,
                failure.retry_header,
            )
        try:
            if self.threaded:
                reply = await asyncio.to_thread(self.script, fake)
            else:
                reply = self.script(fake)
        except Exception as exc:  # a broken script: make it visible in the client error
            log.exception("fake LLM script failed")
            with self._cond:
                self.errors.append(exc)
            return reject(500, f"fake LLM script raised {type(exc).__name__}: {exc}")

        answer = _resolve(reply, provider, len(raw))
        model = fake.model or self.models[0]
        if not fake.stream:
            if provider == "anthropic":
                payload = _anthropic_message(answer, model)
            else:
                payload = _openai_completion(answer, model)
            self._record(RecordedCall(provider, start, time.monotonic(), fake, reply))
            return JSONResponse(payload)

        if provider == "anthropic":
            events = _anthropic_events(answer, model, self.text_chunks, self.arg_chunks)
            media_type = "text/event-stream"
            headers = {"request-id": "req_" + _hex(), "cache-control": "no-cache"}
        else:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            events = _openai_chunks(answer, model, include_usage, self.text_chunks, self.arg_chunks)
            media_type = "text/event-stream"
            headers = {"x-request-id": "req_" + _hex(), "cache-control": "no-cache"}

        if self.stream_delay_s <= 0:
            self._record(RecordedCall(provider, start, time.monotonic(), fake, reply))
            return Response("".join(events), media_type=media_type, headers=headers)

        delay = self.stream_delay_s

        async def slow() -> AsyncIterator[str]:
            try:
                for i, event in enumerate(events):
                    if i:
                        await asyncio.sleep(delay)
                    yield event
            finally:
                self._record(RecordedCall(provider, start, time.monotonic(), fake, reply))

        return StreamingResponse(slow(), media_type=media_type, headers=headers)

    def _broken(self, failure: _Failure, fake: FakeRequest, start: float) -> Response:
        """A 200 stream of ``failure.partial`` that then drops or carries an error event."""
        partial = failure.partial or ""
        status = 0 if failure.drop else failure.status
        reply = Reply(text=partial)
        self._record(RecordedCall(fake.provider, start, time.monotonic(), fake, reply, status))
        model = fake.model or self.models[0]
        head = _stream_head(fake.provider, model, partial, self.text_chunks)
        headers = {"cache-control": "no-cache"}
        if failure.drop:
            return _CutResponse("".join(head), headers)
        text = failure.message or _DEFAULT_MESSAGES.get(failure.status, "error")
        tail = _stream_error_event(fake.provider, failure.status, text)
        return Response("".join([*head, tail]), media_type="text/event-stream", headers=headers)

    async def _anthropic(self, request: Request) -> Response:
        return await self._handle(request, "anthropic")

    async def _openai(self, request: Request) -> Response:
        return await self._handle(request, "openai")

    async def _models(self, request: Request) -> Response:
        anthropic_client = "anthropic-version" in request.headers
        provider = "anthropic" if anthropic_client else "openai"
        ok, _ = self._authorized(request, provider)
        if not ok:
            return _error_response(provider, 401, None)
        if anthropic_client:
            data = [
                {
                    "type": "model",
                    "id": m,
                    "display_name": m,
                    "created_at": "2025-01-01T00:00:00Z",
                }
                for m in self.models
            ]
            return JSONResponse(
                {
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                }
            )
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 1735689600, "owned_by": "fake"}
                    for m in self.models
                ],
            }
        )


# --------------------------------------------------------------------------- CLI

_SCRIPTS: dict[str, Callable[[argparse.Namespace], Script]] = {
    "tool_then_text": lambda a: tool_then_text(a.tool, json.loads(a.args) if a.args else None),
    "text_only": lambda a: text_only(a.text),
    "echo": lambda a: echo(),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.llm",
        description="Fake Anthropic + OpenAI-compatible LLM server (instant, scripted).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8999)
    parser.add_argument("--script", choices=sorted(_SCRIPTS), default="tool_then_text")
    parser.add_argument("--tool", default="get_time", help="tool_then_text: tool to call")
    parser.add_argument("--args", default=None, help="tool_then_text: tool input as JSON")
    parser.add_argument("--text", default="Hello from the fake model.", help="text_only: reply")
    parser.add_argument("--require-key", default=None)
    parser.add_argument("--stream-delay", type=float, default=0.0, help="seconds between events")
    ns = parser.parse_args(argv)
    llm = FakeLLM(
        _SCRIPTS[ns.script](ns),
        require_key=ns.require_key,
        host=ns.host,
        port=ns.port,
        stream_delay_s=ns.stream_delay,
    )

    def announce(server: FakeLLM) -> None:
        print(
            f"fake LLM ({ns.script}) on {server.base_url}\n"
            f"  ANTHROPIC_BASE_URL={server.base_url}\n"
            f"  OPENAI_BASE_URL={server.openai_base_url}",
            flush=True,
        )

    with contextlib.suppress(KeyboardInterrupt):
        llm.serve_forever(announce)


if __name__ == "__main__":
    main()
