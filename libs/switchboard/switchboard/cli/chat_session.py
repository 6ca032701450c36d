"""A WebChat session followed from the terminal: its events read as they come (shown by a
callback), the end of each run noted by the messages it answered, and a dropped socket
reopened with the last ``seq`` so that the missed events are replayed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from switchboard.cli.admin_client import Gateway
from switchboard.cli.chat_socket import ChatError, ChatSocket, Position

RECONNECT_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 3.0, 5.0, 5.0, 5.0, 5.0, 5.0)  # ~32 s in all
KEPT_ENDS = 256  # run ends remembered for messages nobody waits for yet

Show = Callable[[dict[str, Any]], None]
Note = Callable[[str], None]


class LiveSession:
    def __init__(self, gateway: Gateway, session: str | None, show: Show, note: Note) -> None:
        self.gateway = gateway
        self.session = session
        self.show = show
        self.note = note
        self.position = Position()
        self.socket: ChatSocket | None = None
        self.ready = asyncio.Event()
        self.failure: ChatError | None = None
        self.ended: dict[str, dict[str, Any]] = {}  # message id -> its run's lifecycle end
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._follower: asyncio.Task[None] | None = None

    @property
    def key(self) -> str:
        return self.socket.session_key if self.socket else ""

    async def start(self) -> None:
        self.socket = await ChatSocket.open(self.gateway, self.session, self.position)
        self.session = self.socket.session
        self.ready.set()
        self._follower = asyncio.create_task(self._follow())

    async def switch(self, session: str) -> None:
        """Follow ``session`` from now on (a new socket)."""
        await self.close()
        self.session, self.position = session, Position()
        try:
            await self.start()
        except ChatError as exc:
            self._fail(exc)  # nothing to chat in any more
            raise

    async def close(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower
        if self.socket is not None:
            await self.socket.close()
        self.ready.clear()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.failure is not None:
            raise self.failure
        await self.ready.wait()
        if self.failure is not None:
            raise self.failure
        assert self.socket is not None
        return await self.socket.request(method, params)

    async def send(self, text: str) -> dict[str, Any]:
        return await self.request("send", {"text": text})

    async def run_end(self, message_id: str) -> dict[str, Any]:
        """The lifecycle end of the run that answered ``message_id``."""
        if message_id in self.ended:
            return self.ended.pop(message_id)
        if self.failure is not None:
            raise self.failure
        waiter = asyncio.get_running_loop().create_future()
        self.waiting[message_id] = waiter
        try:
            return await waiter
        finally:
            self.waiting.pop(message_id, None)

    async def _follow(self) -> None:
        try:
            await self._events()
        except Exception as exc:  # said to whoever waits: the chat cannot go on
            self._fail(ChatError(f"the chat stopped: {type(exc).__name__}: {exc}"))

    async def _events(self) -> None:
        while True:
            assert self.socket is not None
            frame = await self.socket.event()
            if frame is not None:
                self.show(frame)
                self._noted(frame)
                continue
            self.ready.clear()
            try:
                await self._reconnect(self.socket.close_code)
            except ChatError as exc:
                self._fail(exc)
                return

    def _noted(self, frame: dict[str, Any]) -> None:
        payload = frame.get("payload") or {}
        if frame.get("event") != "lifecycle" or payload.get("phase") != "end":
            return
        for message_id in payload.get("message_ids") or []:
            waiter = self.waiting.pop(message_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(payload)
            else:
                self.ended[message_id] = payload
                while len(self.ended) > KEPT_ENDS:
                    self.ended.pop(next(iter(self.ended)))

    async def _reconnect(self, code: int | None) -> None:
        if code == 4401:
            raise ChatError("the gateway closed the chat: the token is no longer accepted")
        self.note(f"connection lost (code {code}); reconnecting")
        last: ChatError | None = None
        for delay in RECONNECT_DELAYS_S:
            await asyncio.sleep(delay)
            try:
                self.socket = await ChatSocket.open(self.gateway, self.session, self.position)
            except ChatError as exc:
                if exc.code == "unauthorized":
                    raise
                last = exc
                continue
            state = "resumed" if self.socket.connected.get("resumed") else "reconnected"
            self.note(f"{state} ({self.socket.connected.get('replayed', 0)} events replayed)")
            self.ready.set()
            return
        raise ChatError(f"the connection to the gateway was lost: {last}")

    def _fail(self, exc: ChatError) -> None:
        self.failure = exc
        for waiter in self.waiting.values():
            if not waiter.done():
                waiter.set_exception(exc)
        self.waiting.clear()
        self.ready.set()  # what waited for a socket sees the failure
