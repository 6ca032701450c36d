"""Discord's gateway (the WebSocket, API v10 with JSON frames) for the fake Discord
(:mod:`tests.fakes.discord`), served at ``/gateway/`` on the same server; ``GET
/api/v10/gateway/bot`` names it.

It speaks as Discord does: HELLO (op 10) with ``heartbeat_interval``; IDENTIFY (op 2) with the
bot token (else close 4004 "Authentication failed.") gets READY (a dispatch, op 0, with
``session_id``, ``resume_gateway_url`` and the bot ``user``); HEARTBEAT (op 1, the last
sequence) gets HEARTBEAT_ACK (op 11) unless ``ack_heartbeats`` is off; RESUME (op 6) of a known
session replays the events after its ``seq`` and says RESUMED, an unknown one gets
INVALID_SESSION (op 9, ``false``). Tests push events with :meth:`FakeGateway.dispatch` (kept
for a resume while no connection is open), and ``close``, ``reconnect`` and
``invalidate`` end or disturb the live connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.fakes.discord_interactions import snowflake, user

__all__ = ["FakeGateway", "message_create"]

PERSON = "4100000000000000001"


def message_create(
    content: str,
    *,
    channel_id: str,
    guild_id: str | None = None,
    author: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``MESSAGE_CREATE`` event's ``d`` as Discord sends it (in a server when ``guild_id``)."""
    data: dict[str, Any] = {
        "id": snowflake(),
        "type": 0,
        "channel_id": channel_id,
        "author": author or user(PERSON),
        "content": content,
        "attachments": [],
        "embeds": [],
        "mentions": [],
        "mention_roles": [],
        "mention_everyone": False,
        "pinned": False,
        "tts": False,
        "timestamp": "2025-01-01T00:00:00.000000+00:00",
        "edited_timestamp": None,
        "flags": 0,
        "components": [],
        **extra,
    }
    if guild_id is not None:
        data["guild_id"] = guild_id
        data["member"] = {"roles": [], "joined_at": "2024-01-01T00:00:00.000000+00:00"}
    return data


@dataclass
class _Session:
    id: str
    events: list[dict[str, Any]] = field(default_factory=list)  # every dispatch, with "s"


@dataclass
class _Live:
    loop: asyncio.AbstractEventLoop
    outbox: asyncio.Queue[dict[str, Any] | int]  # a frame, or a close code
    session: _Session | None = None


class FakeGateway:
    def __init__(self, token: str, bot_id: str, url: Callable[[], str]) -> None:
        self.token, self.bot_id, self.url = token, bot_id, url
        self.heartbeat_interval_ms = 41_250
        self.ack_heartbeats = True
        self.connections = 0
        self.identifies: list[dict[str, Any]] = []  # IDENTIFY's d, without the token
        self.resumes: list[dict[str, Any]] = []  # RESUME's d, without the token
        self.heartbeats: list[Any] = []  # each HEARTBEAT's d
        self._sessions: dict[str, _Session] = {}
        self._live: _Live | None = None
        self._current: _Session | None = None  # the last session (for dispatch while away)
        self._cond = threading.Condition()

    # --- the tests' side -------------------------------------------------------------------

    def dispatch(self, kind: str, data: dict[str, Any]) -> int:
        """An event for the bot's session: sent now, or replayed when it resumes. Its seq."""
        with self._cond:
            session = self._current
            if session is None:
                raise RuntimeError("no session: the bot never identified")
            seq = len(session.events) + 1
            frame = {"op": 0, "t": kind, "s": seq, "d": data}
            session.events.append(frame)
            live = self._live
        if live is not None and live.session is session:
            live.loop.call_soon_threadsafe(live.outbox.put_nowait, frame)
        return seq

    def close(self, code: int) -> None:
        """Close the live connection with ``code`` (4000: unknown error, resumable)."""
        self._push(code)

    def reconnect(self) -> None:
        self._push({"op": 7, "d": None})

    def invalidate(self, resumable: bool = False) -> None:
        self._push({"op": 9, "d": resumable})

    def wait_for(self, check: Callable[[FakeGateway], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not check(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the fake gateway never saw what was awaited")
                self._cond.wait(min(left, 0.5))

    def _push(self, item: dict[str, Any] | int) -> None:
        with self._cond:
            live = self._live
        if live is None:
            raise RuntimeError("no live connection")
        live.loop.call_soon_threadsafe(live.outbox.put_nowait, item)

    def _changed(self, update: Callable[[], None] = lambda: None) -> None:
        with self._cond:
            update()
            self._cond.notify_all()

    # --- the server's side -----------------------------------------------------------------

    async def endpoint(self, ws: WebSocket) -> None:
        await ws.accept()
        live = _Live(asyncio.get_running_loop(), asyncio.Queue())
        with self._cond:
            self._live = live
            self.connections += 1
            self._cond.notify_all()
        await ws.send_json({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}})
        writer = asyncio.create_task(self._write(ws, live))
        try:
            while not writer.done():
                frame = json.loads(await ws.receive_text())
                await self._on_frame(live, frame)
        except (WebSocketDisconnect, RuntimeError):
            pass  # the bot closed (RuntimeError: receiving after our own close)
        finally:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer
            self._changed(lambda: setattr(self, "_live", None) if self._live is live else None)

    async def _write(self, ws: WebSocket, live: _Live) -> None:
        while True:
            item = await live.outbox.get()
            if isinstance(item, int):
                await ws.close(item)
                return
            await ws.send_json(item)

    async def _on_frame(self, live: _Live, frame: dict[str, Any]) -> None:
        op, data = frame.get("op"), frame.get("d")
        if op == 1:
            self._changed(lambda: self.heartbeats.append(data))
            if self.ack_heartbeats:
                live.outbox.put_nowait({"op": 11})
        elif op == 2 and isinstance(data, dict):
            if data.get("token") != self.token:
                live.outbox.put_nowait(4004)
                return
            session = _Session(uuid.uuid4().hex)
            self._sessions[session.id] = session
            live.session = session
            ready = {
                "v": 10,
                "session_id": session.id,
                "resume_gateway_url": self.url(),
                "user": {"id": self.bot_id, "username": "switchboard", "bot": True},
                "guilds": [],
                "application": {"id": self.bot_id, "flags": 0},
            }

            def identified() -> None:
                self.identifies.append({k: v for k, v in data.items() if k != "token"})
                self._current = session

            self._changed(identified)
            session.events.append({"op": 0, "t": "READY", "s": 1, "d": ready})
            live.outbox.put_nowait(session.events[-1])
        elif op == 6 and isinstance(data, dict):
            found = self._sessions.get(str(data.get("session_id")))
            self._changed(
                lambda: self.resumes.append({k: v for k, v in data.items() if k != "token"})
            )
            if found is None or data.get("token") != self.token:
                live.outbox.put_nowait({"op": 9, "d": False})
                return
            live.session = found
            seq = data.get("seq") or 0
            for event in found.events:
                if event["s"] > seq:
                    live.outbox.put_nowait(event)
            resumed = {"op": 0, "t": "RESUMED", "s": len(found.events) + 1, "d": {}}
            found.events.append(resumed)
            live.outbox.put_nowait(resumed)
