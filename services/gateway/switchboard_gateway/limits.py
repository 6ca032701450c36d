"""Bounds on what one caller can make the gateway hold: the bytes of a request body (413 before
the body is read, parsed or authenticated) and event streams (how many one token keeps open at
once, and for how long)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterable

from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiError, error_body


def too_large(limit: int) -> str:
    return f"The request body is larger than the gateway accepts ({limit} bytes)."


class BodyTooLarge(HTTPException):
    """Raised where the app reads the body once it passed the limit; the app's handler of
    HTTP exceptions answers it (413), and FastAPI passes it through its body parsing as is."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, too_large(limit))


def _declared_length(scope: Scope) -> int | None:
    for key, value in scope["headers"]:
        if key == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class BodyLimit:
    """ASGI middleware: a body that declares more than ``max_bytes`` (Content-Length) is
    answered 413 from its headers alone, before authentication; a body without a length
    (chunked) is counted as the app reads it, and the read that passes the limit raises
    :class:`BodyTooLarge` instead of returning data, so nothing past the limit is held (once a
    response has started, e.g. an event stream, the app sees the client leave instead and the
    response is ended). The rest of a refused body is drained and dropped by the server."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self.refuse(scope, receive, send)
            return
        received = 0
        started = ended = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    if started:  # too late for a status: the app sees the client leave
                        return {"type": "http.disconnect"}
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watched(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if started:
                raise
            await self.refuse(scope, receive, send)
            return
        if started and not ended and received > self.max_bytes:
            # A streamed response the app stopped because of it: end it properly.
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = error_body(413, too_large(self.max_bytes), "request_too_large")
        await JSONResponse(body, status_code=413)(scope, receive, send)


class StreamSlots:
    """How many event streams each caller (a bearer token's digest) has open; at most
    ``limit`` at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open: Counter[str] = Counter()

    def take(self, caller: str) -> StreamSlot:
        """A slot for one more stream of ``caller``, or a 429 naming the limit."""
        if self.open[caller] >= self.limit:
            raise ApiError(
                429,
                f"Too many event streams open with this token: at most {self.limit} at once "
                "(SB_MAX_STREAMS_PER_TOKEN); close one first.",
                code="too_many_streams",
            )
        self.open[caller] += 1
        return StreamSlot(self, caller)


class StreamSlot:
    def __init__(self, slots: StreamSlots, caller: str) -> None:
        self.slots = slots
        self.caller = caller
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.slots.open[self.caller] -= 1
            if self.slots.open[self.caller] <= 0:
                del self.slots.open[self.caller]


class SlotStream(StreamingResponse):
    """A streaming response that gives its stream slot back when it ends, however it ends
    (done, the client gone, an error)."""

    def __init__(
        self, content: AsyncIterable[str], slot: StreamSlot, headers: dict[str, str]
    ) -> None:
        super().__init__(content, media_type="text/event-stream", headers=headers)
        self.slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slot.release()
