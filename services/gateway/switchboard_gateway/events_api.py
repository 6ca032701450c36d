"""A session's live agent events as Server-Sent Events: assistant deltas, tool phases
(``start``/``update``/``approval``/``result``) and run lifecycle, for WebChat-like clients."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from nats.aio.msg import Msg

from switchboard import bus
from switchboard.sessions import session_token
from switchboard.v1 import messages_pb2

from .auth import caller_id
from .errors import checked_session_key
from .limits import SlotStream, StreamSlots

router = APIRouter()
HEARTBEAT_S = 15.0
QUEUE_LIMIT = 10_000  # events buffered for a slow client before it is cut off
LIFETIME_REACHED = ": the stream reached its maximum lifetime; reconnect to go on\n\n"


def event_json(e: messages_pb2.AgentEvent) -> dict[str, Any]:
    body: dict[str, Any] = {
        "run_id": e.run_id,
        "session_key": e.session_key,
        "message_id": e.message_id,
        "seq": e.seq,
        "stream": e.stream,
        "phase": e.phase,
        "ts_ms": e.ts_ms,
    }
    for name in ("text", "tool", "call_id", "stop_reason", "model"):
        value = getattr(e, name)
        if value:
            body[name] = value
    if e.data_json:
        body["data"] = json.loads(e.data_json)
    if e.HasField("usage"):
        body["usage"] = {
            "input_tokens": e.usage.input_tokens,
            "output_tokens": e.usage.output_tokens,
        }
    if len(e.message_ids) > 1:
        body["message_ids"] = list(e.message_ids)
    return body


@router.get("/api/sessions/{key}/events")
async def session_events(key: str, request: Request) -> SlotStream:
    """The stream holds one of the token's stream slots (SB_MAX_STREAMS_PER_TOKEN) and ends,
    with a comment saying so, after SB_STREAM_MAX_LIFETIME_S (clients reconnect)."""
    key = checked_session_key(key)
    streams: StreamSlots = request.app.state.streams
    slot = streams.take(caller_id(request.headers.get("authorization", "")))
    lifetime_s: float = request.app.state.settings.stream_max_lifetime_s
    conversations = request.app.state.conversations
    nc = conversations.nc
    subject = conversations.subjects.events(session_token(key))
    queue: asyncio.Queue[messages_pb2.AgentEvent | None] = asyncio.Queue()

    async def on_event(_: Msg, event: messages_pb2.AgentEvent) -> None:
        if queue.qsize() >= QUEUE_LIMIT:
            queue.put_nowait(None)  # too slow: end the stream, the client reconnects
            return
        queue.put_nowait(event)

    async def stream() -> AsyncIterator[str]:
        sub = await nc.subscribe(
            subject, cb=bus.decoding(messages_pb2.AgentEvent, on_event, "session events")
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + lifetime_s
        try:
            yield ": connected\n\n"
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    yield LIFETIME_REACHED
                    return
                try:
                    event = await asyncio.wait_for(queue.get(), min(HEARTBEAT_S, remaining))
                except TimeoutError:
                    if deadline > loop.time():
                        yield ": keep-alive\n\n"
                    continue
                if event is None:
                    return
                yield f"event: {event.stream}\ndata: {json.dumps(event_json(event))}\n\n"
        finally:
            await sub.unsubscribe()

    return SlotStream(stream(), slot, headers={"Cache-Control": "no-cache"})
