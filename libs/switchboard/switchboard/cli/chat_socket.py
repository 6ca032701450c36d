"""The terminal's WebChat client (docs/webchat-protocol.md): one socket to the running gateway's
``/webchat/ws``, connected with the gateway token to one session; requests answered by id,
events handed out in order, and the feed's position (``epoch``, last ``seq``) kept so that the
next socket resumes where a dropped one stopped."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from switchboard.cli.admin_client import NOT_RUNNING, AdminError, Gateway

SOCKET_PATH = "/webchat/ws"
OPEN_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 60.0
MAX_FRAME_BYTES = 16 * 2**20  # what the gateway's uvicorn accepts at most
CLOSE_UNAUTHORIZED = 4401  # the protocol's: a wrong token, do not retry with it
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ChatError(AdminError):
    """A refused connection or a failed request; the text is for the user."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class Disconnected(ChatError):
    """The socket closed before the answer came."""


def socket_url(http_url: str) -> str:
    """The WebSocket URL of the gateway at ``http_url``."""
    scheme, sep, rest = http_url.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise ChatError(f"the gateway URL {http_url!r} is not http:// or https://")
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest.rstrip('/')}{SOCKET_PATH}"


def session_id(given: str) -> str:
    """The WebChat session of ``--session``: its id (``A-Z a-z 0-9 _ -``, up to 64), or a
    whole WebChat session key ``<agent>:webchat:<id>``."""
    parts = given.split(":")
    if len(parts) == 3 and parts[1] == "webchat" and SESSION_ID.fullmatch(parts[2]):
        return parts[2]
    if SESSION_ID.fullmatch(given):
        return given
    raise ChatError(
        f"session {given!r}: give 1-64 of A-Z a-z 0-9 _ - (or <agent>:webchat:<that>); "
        "the terminal chats in WebChat sessions"
    )


@dataclass
class Position:
    """Where a session's feed was read up to: what a reconnect sends to resume."""

    epoch: str | None = None
    seq: int | None = None


class ChatSocket:
    """One connected socket. :meth:`event` gives the events in order (None once it closed);
    :meth:`request` a method's answer."""

    def __init__(self, ws: ClientConnection, connected: dict[str, Any], position: Position) -> None:
        self.ws = ws
        self.connected = connected
        self.session: str = connected["session"]
        self.session_key: str = connected["session_key"]
        self.position = position
        position.epoch = connected["epoch"]
        if position.seq is None or not connected.get("resumed"):
            position.seq = connected["seq"]  # the missed events (if any) follow from there
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())
        self.close_code: int | None = None

    @classmethod
    async def open(
        cls, gateway: Gateway, session: str | None, position: Position | None = None
    ) -> ChatSocket:
        """A socket connected to ``session`` (None: a new one), resuming from ``position``."""
        url = socket_url(gateway.url)
        try:
            ws = await connect(url, open_timeout=OPEN_TIMEOUT_S, max_size=MAX_FRAME_BYTES)
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            reason = str(exc) or type(exc).__name__
            raise ChatError(
                f"cannot reach the gateway at {gateway.url}: {reason}; {NOT_RUNNING}"
            ) from None
        position = position or Position()
        params: dict[str, Any] = {"token": gateway.token, "session": session}
        if position.epoch is not None and position.seq is not None:
            params |= {"epoch": position.epoch, "last_seq": position.seq}
        try:
            await ws.send(
                json.dumps({"type": "req", "id": "connect", "method": "connect", "params": params})
            )
            first = json.loads(await asyncio.wait_for(ws.recv(), OPEN_TIMEOUT_S))
        except (ConnectionClosed, TimeoutError, ValueError) as exc:
            await ws.close()
            raise ChatError(
                f"the gateway at {gateway.url} did not accept the chat: {exc}"
            ) from None
        if not isinstance(first, dict) or first.get("type") != "res":
            await ws.close()
            raise ChatError(f"the gateway at {gateway.url} does not speak the WebChat protocol")
        if not first.get("ok"):
            await ws.close()
            error = first.get("error") or {}
            if error.get("code") == "unauthorized":
                raise ChatError(
                    "the gateway refused the token (SB_GATEWAY_TOKEN or the token file of "
                    "$SB_HOME)",
                    "unauthorized",
                )
            raise ChatError(f"cannot chat: {error.get('message', first)}", error.get("code", ""))
        return cls(ws, first["payload"], position)

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                frame = json.loads(raw)
                if frame.get("type") == "res":
                    waiter = self._waiting.pop(str(frame.get("id")), None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(frame)
                elif frame.get("type") == "event" and isinstance(frame.get("seq"), int):
                    self._events.put_nowait(frame)
        except (ConnectionClosed, ValueError, AttributeError):
            pass  # dropped, or a frame that is not a JSON object: reconnect (close_code says)
        finally:
            await self.ws.close()  # (closed already unless a frame was unreadable)
            self.close_code = self.ws.close_code
            gone = Disconnected("the connection to the gateway dropped before the answer came")
            for waiter in self._waiting.values():
                if not waiter.done():
                    waiter.set_exception(gone)
            self._waiting.clear()
            self._events.put_nowait(None)

    async def event(self) -> dict[str, Any] | None:
        """The next event frame (its ``seq`` becomes the position), None once closed."""
        frame = await self._events.get()
        if frame is None:
            self._events.put_nowait(None)  # closed for every later call too
            return None
        self.position.seq = frame["seq"]
        return frame

    async def request(
        self, method: str, params: dict[str, Any], timeout: float = REQUEST_TIMEOUT_S
    ) -> dict[str, Any]:
        """The payload of ``method``'s answer; :class:`ChatError` with its message if it
        failed, :class:`Disconnected` if the socket closed first."""
        request_id = str(next(self._ids))
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        frame = {"type": "req", "id": request_id, "method": method, "params": params}
        try:
            await self.ws.send(json.dumps(frame))
            answer = await asyncio.wait_for(waiter, timeout)
        except ConnectionClosed as exc:
            raise Disconnected("the connection to the gateway dropped") from exc
        except TimeoutError as exc:
            raise ChatError(f"the gateway did not answer {method} in {timeout:.0f} s") from exc
        finally:
            self._waiting.pop(request_id, None)
        if not answer.get("ok"):
            error = answer.get("error") or {}
            raise ChatError(error.get("message", "the request failed"), error.get("code", ""))
        payload: dict[str, Any] = answer["payload"]
        return payload

    async def close(self) -> None:
        await self.ws.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
