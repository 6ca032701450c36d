"""``WS /webchat/ws``: the WebChat protocol (docs/webchat-protocol.md). The socket
authenticates itself (the gateway's token middleware only sees HTTP): its first request must be
``connect`` with the gateway token, compared in constant time; anything else closes it (4401).
A connected socket holds one of the token's stream slots, follows one session's events and
answers requests; a bad frame gets an error response and the socket stays open."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid

from fastapi import FastAPI, WebSocket
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect

from switchboard import jsonsafe

from ..auth import caller_id, token_problem
from ..config import GatewaySettings
from ..errors import ApiError
from ..limits import StreamSlot, StreamSlots
from . import protocol
from .feed import Attached, FeedHub, Listener
from .methods import MethodError, Methods, session_key
from .protocol import ConnectParams, Request, RequestId
from .route import SOCKETS

log = logging.getLogger(__name__)
GONE = (WebSocketDisconnect, RuntimeError, OSError)  # what sending to a closed socket raises


class FrameError(Exception):
    def __init__(self, request_id: RequestId | None, code: str, message: str) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.code = code
        self.message = message


def parse_request(raw: str | bytes, max_bytes: int) -> Request:
    """A request frame, or :class:`FrameError` saying what is wrong with it (with the
    request's id when it could be read)."""
    if isinstance(raw, bytes):
        raise FrameError(None, protocol.BAD_FRAME, "Send JSON text frames, not binary ones.")
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise FrameError(
            None,
            protocol.FRAME_TOO_LARGE,
            f"The frame has {size} bytes, at most {max_bytes} are accepted "
            "(SB_WEBCHAT_MAX_FRAME_BYTES).",
        )
    try:  # bounded: a frame nested past jsonsafe.MAX_DEPTH is refused before it is walked
        data = jsonsafe.loads(raw, max_bytes=max_bytes)
    except jsonsafe.JsonRefused as exc:
        raise FrameError(None, protocol.BAD_JSON, f"The frame is refused: {exc}.") from None
    given = data.get("id") if isinstance(data, dict) else None
    request_id = given if isinstance(given, str | int) and not isinstance(given, bool) else None
    try:
        return Request.model_validate(data)
    except ValidationError as exc:
        raise FrameError(request_id, protocol.BAD_FRAME, protocol.problem(exc)) from exc


def hub_of(app: FastAPI) -> FeedHub:
    """The app's feeds (made on first use)."""
    hub: FeedHub | None = getattr(app.state, "webchat_feeds", None)
    if hub is None:
        settings: GatewaySettings = app.state.settings
        conversations = app.state.conversations
        hub = FeedHub(
            conversations.nc,
            conversations.subjects,
            settings.webchat_replay_events,
            settings.webchat_replay_grace_s,
        )
        app.state.webchat_feeds = hub
    return hub


class Connection:
    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.app: FastAPI = ws.app
        self.settings: GatewaySettings = self.app.state.settings
        self.max_bytes = self.settings.webchat_max_frame_bytes
        self._send_lock = asyncio.Lock()
        self.closed = False

    async def send(self, text: str) -> None:
        async with self._send_lock:
            await self.ws.send_text(text)

    async def close(self, code: int, reason: str) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(*GONE):
                await self.ws.close(code, reason)

    async def receive(self) -> str | bytes | None:
        """The next frame's data; None once the client is gone."""
        message = await self.ws.receive()
        if message["type"] == "websocket.disconnect":
            self.closed = True
            return None
        text: str | None = message.get("text")
        return text if text is not None else bytes(message.get("bytes") or b"")

    async def refuse(
        self, request_id: RequestId | None, code: str, message: str, close: int
    ) -> None:
        with contextlib.suppress(*GONE):
            await self.send(protocol.error(request_id, code, message))
        await self.close(close, code)

    async def run(self) -> None:
        await self.ws.accept()
        try:
            raw = await asyncio.wait_for(self.receive(), self.settings.webchat_connect_timeout_s)
        except TimeoutError:
            await self.refuse(
                None,
                protocol.UNAUTHORIZED,
                "No connect request in time.",
                protocol.CLOSE_CONNECT_TIMEOUT,
            )
            return
        if raw is None:
            return
        connected = await self.handshake(raw)
        if connected is None:
            return
        request_id, params, slot = connected
        try:
            await self.serve(request_id, params)
        finally:
            slot.release()

    async def handshake(
        self, raw: str | bytes
    ) -> tuple[RequestId, ConnectParams, StreamSlot] | None:
        """The first frame: a connect request with the right token (else the socket is
        closed, 4401), and a stream slot for it (else 4429)."""
        first = "The first request must be connect with the gateway token."
        try:
            request = parse_request(raw, self.max_bytes)
        except FrameError as exc:
            await self.refuse(
                exc.request_id, protocol.UNAUTHORIZED, first, protocol.CLOSE_UNAUTHORIZED
            )
            return None
        if request.method != "connect":
            await self.refuse(request.id, protocol.UNAUTHORIZED, first, protocol.CLOSE_UNAUTHORIZED)
            return None
        try:
            params = ConnectParams.model_validate(request.params)
        except ValidationError as exc:
            message = f"Invalid connect parameters: {protocol.problem(exc)}"
            await self.refuse(
                request.id, protocol.INVALID_PARAMS, message, protocol.CLOSE_UNAUTHORIZED
            )
            return None
        bearer = f"Bearer {params.token}"
        if token_problem(bearer, self.settings.gateway_token.get_secret_value()) is not None:
            await self.refuse(
                request.id, protocol.UNAUTHORIZED, "Invalid token.", protocol.CLOSE_UNAUTHORIZED
            )
            return None
        streams: StreamSlots = self.app.state.streams
        try:
            slot = streams.take(caller_id(bearer))
        except ApiError as exc:
            await self.refuse(request.id, protocol.TOO_MANY, exc.message, protocol.CLOSE_TOO_MANY)
            return None
        return request.id, params, slot

    async def serve(self, request_id: RequestId, params: ConnectParams) -> None:
        session = params.session or uuid.uuid4().hex
        key = session_key(self.settings.default_agent, session)
        hub = hub_of(self.app)
        attached = await hub.attach(key, params.epoch, params.last_seq)
        SOCKETS.inc()
        try:
            resumed = params.last_seq is not None and attached.gap is None
            await self.greet(request_id, session, key, attached, resumed)
            methods = Methods(
                self.settings,
                self.app.state.conversations,
                self.app.state.sessions,
                session,
                self.app.state.approvals,
                self.app.state.media,
            )
            await self.follow(attached.listener, methods)
        except GONE:
            pass  # the client left while being written to
        finally:
            SOCKETS.dec()
            hub.detach(key, attached.listener)

    async def greet(
        self, request_id: RequestId, session: str, key: str, at: Attached, resumed: bool
    ) -> None:
        """The connect response, then the missed events (or a gap event)."""
        result = protocol.ConnectResult(
            session=session,
            session_key=key,
            epoch=at.epoch,
            seq=at.position,
            resumed=resumed,
            replayed=len(at.replay),
        )
        await self.send(protocol.ok(request_id, result))
        for event in at.replay:
            await self.send(event.frame)
        if at.gap is not None:
            await self.send(protocol.event("gap", at.gap, at.position))

    async def follow(self, listener: Listener, methods: Methods) -> None:
        """Events out and requests in until the client leaves, falls behind (1013) or the
        socket reaches its lifetime (4000)."""
        writer = asyncio.create_task(self.pump(listener))
        reader = asyncio.create_task(self.read(methods))
        lifetime = self.settings.stream_max_lifetime_s
        done, pending = await asyncio.wait(
            {writer, reader}, timeout=lifetime, return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task in done:
            exc = task.exception()
            if exc is not None and not isinstance(exc, GONE):
                log.error("webchat socket failed", exc_info=exc)
                await self.close(1011, "internal error")
        if not done:
            await self.close(protocol.CLOSE_LIFETIME, "lifetime reached; reconnect")
        elif writer in done and not writer.exception():
            await self.close(protocol.CLOSE_TOO_SLOW, "too slow; reconnect")

    async def pump(self, listener: Listener) -> None:
        while True:
            event = await listener.queue.get()
            if event is None:
                return  # fell behind: closed, the client resumes from its last seq
            await self.send(event.frame)

    async def read(self, methods: Methods) -> None:
        while True:
            raw = await self.receive()
            if raw is None:
                return
            await self.send(await self.answer(raw, methods))

    async def answer(self, raw: str | bytes, methods: Methods) -> str:
        try:
            request = parse_request(raw, self.max_bytes)
        except FrameError as exc:
            return protocol.error(exc.request_id, exc.code, exc.message)
        rid = request.id
        if request.method == "connect":
            return protocol.error(rid, protocol.ALREADY_CONNECTED, "This socket is connected.")
        model = protocol.PARAMS.get(request.method)
        if model is None:
            known = ", ".join(sorted(protocol.PARAMS))
            message = f"Unknown method {request.method[:64]!r}; known: {known}."
            return protocol.error(rid, protocol.UNKNOWN_METHOD, message)
        try:
            params = model.model_validate(request.params)
            if isinstance(params, protocol.SendParams):
                result: protocol.Frame = await methods.send(params)
            elif isinstance(params, protocol.HistoryParams):
                result = await methods.history(params)
            elif isinstance(params, protocol.DecideParams):
                result = await methods.decide(params)
            elif isinstance(params, protocol.SessionsParams):
                result = await methods.sessions_list(params)
            else:
                assert isinstance(params, protocol.AbortParams)
                result = await methods.abort(params)
        except ValidationError as exc:
            message = f"Invalid parameters: {protocol.problem(exc)}"
            return protocol.error(rid, protocol.INVALID_PARAMS, message)
        except MethodError as exc:
            return protocol.error(rid, exc.code, exc.message)
        return protocol.ok(rid, result)
