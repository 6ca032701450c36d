"""OpenAI-compatible Chat Completions: POST /v1/chat/completions (SSE when stream) and
GET /v1/models. ``model`` is ``switchboard`` or ``switchboard:<agent>``."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Literal

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from switchboard.sessions import direct_key, is_agent_id
from switchboard.v1 import messages_pb2

from .attachments import image_urls, ingest_images
from .auth import caller_id
from .config import MESSAGES_CEILING, GatewaySettings
from .conversations import Conversations, Outgoing, ReplyTimeout
from .errors import ApiError, error_body
from .limits import SlotStream, StreamSlots

router = APIRouter()
PEER = re.compile(r"[A-Za-z0-9_.@+-]{1,128}")  # fullmatch: no trailing newline


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text or "" for p in self.content if p.type == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1, max_length=MESSAGES_CEILING)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None


def _agent_for(model: str, default_agent: str) -> str:
    name, _, agent = model.partition(":")
    if name != "switchboard" or (agent and not is_agent_id(agent)):
        raise ApiError(
            404,
            f"The model '{model}' does not exist; use 'switchboard' or 'switchboard:<agent>'.",
            code="model_not_found",
            param="model",
        )
    return agent or default_agent


def _images(req: ChatRequest) -> list[str]:
    """The image URLs of the last message (a user message's ``image_url`` parts)."""
    content = req.messages[-1].content
    return image_urls(content) if isinstance(content, list) else []


def _outgoing(
    req: ChatRequest, agent: str, session_header: str | None, images: bool = False
) -> Outgoing:
    last = req.messages[-1]
    if last.role != "user" or not (last.text().strip() or images):
        raise ApiError(
            400, "The last message must be a user message with text or images.", param="messages"
        )
    if session_header or req.user:
        peer = session_header or req.user or ""
        if not PEER.fullmatch(peer):
            raise ApiError(
                400,
                "The session id (user / X-Switchboard-Session) must be 1-128 characters of "
                "letters, digits and _ . @ + -",
                param="user",
            )
        key = direct_key(agent, "openai", peer)
        return Outgoing("openai", last.text(), key, agent, sender=peer)
    context = [
        ("system" if m.role == "developer" else m.role, m.text())
        for m in req.messages[:-1]
        if m.role in ("system", "developer", "user", "assistant")
    ]
    key = direct_key(agent, "openai", f"oneoff-{uuid.uuid4().hex[:16]}")
    return Outgoing("openai", last.text(), key, agent, context=context)


def _check_count(req: ChatRequest, settings: GatewaySettings) -> None:
    """At most SB_MAX_MESSAGES_PER_REQUEST messages (400 naming the limit)."""
    if len(req.messages) > settings.max_messages_per_request:
        raise ApiError(
            400,
            f"Too many messages: {len(req.messages)} in one request, at most "
            f"{settings.max_messages_per_request} (SB_MAX_MESSAGES_PER_REQUEST).",
            code="too_many_messages",
            param="messages",
        )


def _check_text(out: Outgoing, settings: GatewaySettings) -> None:
    """At most SB_MAX_BODY_CHARS characters of text go on the bus for one request (the
    context of a one-off included; 400 naming the limit)."""
    chars = len(out.text) + sum(len(text) for _, text in out.context)
    if chars > settings.max_body_chars:
        raise ApiError(
            400,
            f"Too much text: {chars} characters in one request, at most "
            f"{settings.max_body_chars} (SB_MAX_BODY_CHARS).",
            code="too_much_text",
            param="messages",
        )


def _finish(stop_reason: str) -> str:
    return "length" if stop_reason == "max_tokens" else "stop"


def _usage(event: messages_pb2.AgentEvent) -> dict[str, int]:
    i, o = event.usage.input_tokens, event.usage.output_tokens
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    body: ChatRequest,
    request: Request,
    x_switchboard_session: str | None = Header(default=None),
) -> JSONResponse | SlotStream:
    settings: GatewaySettings = request.app.state.settings
    _check_count(body, settings)
    agent = _agent_for(body.model, settings.default_agent)
    urls = _images(body)
    out = _outgoing(body, agent, x_switchboard_session, bool(urls))
    _check_text(out, settings)
    if urls:
        out.media = await ingest_images(request.app.state.media, urls)
    conversations: Conversations = request.app.state.conversations
    completion_id = f"chatcmpl-{out.message_id}"
    created = int(time.time())
    if body.stream:
        # A stream holds one of the token's slots and lasts at most SB_STREAM_MAX_LIFETIME_S.
        streams: StreamSlots = request.app.state.streams
        slot = streams.take(caller_id(request.headers.get("authorization", "")))
        timeout_s = min(settings.reply_timeout_s, settings.stream_max_lifetime_s)
        events = conversations.converse(out, timeout_s)
        try:  # publish and wait for the run to start, so errors surface as a status code
            first = await anext(events)
        except BaseException as exc:
            slot.release()
            if isinstance(exc, ReplyTimeout):
                message = "The assistant did not start in time; the message is queued."
                raise ApiError(504, message) from exc
            raise
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return SlotStream(
            _sse(first, events, completion_id, created, body.model, include_usage),
            slot,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    text: list[str] = []
    # Closed here, not left to the garbage collector: the loop would close it later in a task
    # of its own (a cross-thread wake-up), and its subscription would outlive the answer.
    try:
        async with aclosing(conversations.converse(out, settings.reply_timeout_s)) as events:
            async for event in events:
                if event.stream == "assistant":
                    text.append(event.text)
                elif event.stream == "lifecycle" and event.phase == "end":
                    return JSONResponse(
                        {
                            "id": completion_id,
                            "object": "chat.completion",
                            "created": created,
                            "model": body.model,
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": event.text},
                                    "finish_reason": _finish(event.stop_reason),
                                }
                            ],
                            "usage": _usage(event),
                        }
                    )
    except ReplyTimeout:
        pass
    raise ApiError(504, "The assistant did not answer in time; the message is queued.")


async def _sse(
    first: messages_pb2.AgentEvent,
    events: AsyncIterator[messages_pb2.AgentEvent],
    completion_id: str,
    created: int,
    model: str,
    include_usage: bool,
) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n"

    yield chunk({"role": "assistant", "content": ""})

    async def all_events() -> AsyncIterator[messages_pb2.AgentEvent]:
        yield first
        async for e in events:
            yield e

    try:
        async for event in all_events():
            if event.stream == "assistant" and event.text:
                yield chunk({"content": event.text})
            elif event.stream == "lifecycle" and event.phase == "end":
                yield chunk({}, _finish(event.stop_reason))
                if include_usage:
                    usage = {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": _usage(event),
                    }
                    yield f"data: {json.dumps(usage)}\n\n"
    except ReplyTimeout:
        body = error_body(504, "The assistant did not answer in time; the message is queued.")
        yield f"data: {json.dumps(body)}\n\n"
    yield "data: [DONE]\n\n"


@router.get("/v1/models")
async def list_models(request: Request) -> dict[str, Any]:
    agent = request.app.state.settings.default_agent
    ids = ["switchboard", f"switchboard:{agent}"]
    return {
        "object": "list",
        "data": [
            {"id": i, "object": "model", "created": 0, "owned_by": "switchboard"} for i in ids
        ],
    }
