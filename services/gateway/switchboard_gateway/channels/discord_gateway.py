"""Discord's gateway connection (the WebSocket), for DMs and mentions: off unless
``SB_DISCORD_GATEWAY=true``.

One gateway replica holds the connection: the one holding the lease ``discord.<account>`` in the
channel lease bucket (:mod:`.lease`); losing the lease closes it at once. While connected
(API v10, JSON):

1. ``GET /gateway/bot`` gives the URL; Discord says HELLO with the heartbeat interval;
2. the connection IDENTIFYs with the bot token and the intents ``GUILD_MESSAGES`` and
   ``DIRECT_MESSAGES`` (no privileged intent: messages that mention the bot and DMs carry their
   text without MESSAGE_CONTENT), or RESUMEs the session it had (after a drop, a RECONNECT, or
   a resumable INVALID_SESSION; Discord then replays what was missed);
3. it heartbeats every interval (the first after a random fraction of it) with the last
   sequence handled; a heartbeat not acknowledged by the next one means a dead connection,
   which is closed and resumed;
4. each ``MESSAGE_CREATE`` is parsed (:mod:`.discord_events`) and published to ``INBOUND``
   under ``discord:<account>:<message id>``, so a replayed event is dropped as a duplicate.
   The sequence moves past an event only once it is published: if publishing fails the
   connection is closed and resumed from there, and Discord sends the event again.

Close codes that no retry can fix (4004 authentication failed, 4010-4014: shard, version or
intents refused) stop the connection on this replica with an error in the log, and it keeps
the lease so no other replica tries either; others are retried with backoff (1, 2 ... 60 s).
The session is not handed to another replica: one taking over IDENTIFYs afresh, and messages
sent in between are not seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

from switchboard import jsonsafe
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2

from ..conversations import Conversations
from .base import ChannelError, OnPublish
from .discord_events import parse_message
from .lease import ChannelLease, LeasedWork, bucket_ttl, lease_key

log = logging.getLogger(__name__)

GUILD_MESSAGES, DIRECT_MESSAGES = 1 << 9, 1 << 12
INTENTS = GUILD_MESSAGES | DIRECT_MESSAGES
DISPATCH, HEARTBEAT, IDENTIFY, RESUME = 0, 1, 2, 6
RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 7, 9, 10, 11
# Close codes after which only a new configuration helps.
FATAL = {
    4004: "authentication failed (SB_DISCORD_BOT_TOKEN)",
    4010: "invalid shard",
    4011: "sharding required",
    4012: "invalid API version",
    4013: "invalid intents",
    4014: "disallowed intents",
}
NEW_SESSION = {4007, 4009}  # invalid sequence, session timed out: IDENTIFY again
RESUME_CLOSE = 4000  # how this side closes a connection it means to resume
MAX_BACKOFF_S = 60.0

Publish = Callable[[messages_pb2.InboundMessage], Awaitable[object]]


class Fatal(Exception):
    """Discord closed the connection for a reason no retry fixes."""


class Reconnect(Exception):
    """End this connection and open another (resuming when there is a session)."""


@dataclass
class Session:
    id: str
    resume_url: str


class DiscordGatewayConnection:
    """The work done under the lease (:meth:`run`). ``http``: a client on the REST API base
    (for ``GET /gateway/bot``); ``publish``: INBOUND publishing."""

    def __init__(
        self,
        token: str,
        http: Callable[[], httpx.AsyncClient | None],
        publish: Publish,
        *,
        account: str = "default",
        min_backoff_s: float = 1.0,
    ) -> None:
        self._token = token
        self._http = http
        self.publish = publish
        self.account = account
        self.min_backoff_s = min_backoff_s
        self.bot_id = ""
        self.session: Session | None = None
        self.seq: int | None = None  # the last event handled
        self.connections = 0
        self._acked = True
        self._established = False  # READY or RESUMED on the current connection
        self.fatal = ""  # why Discord refused the bot for good, once it has
        self.new_session_pause_s = (1.0, 5.0)  # after INVALID_SESSION (Discord: 1-5 s)

    def __repr__(self) -> str:  # never the token
        return f"DiscordGatewayConnection(account={self.account!r}, bot={self.bot_id!r})"

    async def run(self, lease: ChannelLease | None = None) -> None:
        backoff = self.min_backoff_s
        while True:
            try:
                await self._connect()
            except Fatal as exc:
                self.fatal = str(exc)
                log.error("discord gateway refused the bot: %s; not reconnecting", exc)
                await asyncio.Event().wait()  # hold the lease: no other replica tries either
            except Reconnect as exc:
                log.info("discord gateway: reconnecting (%s)", exc)
            except (OSError, TimeoutError, WebSocketException, httpx.HTTPError) as exc:
                log.warning("discord gateway connection failed (%s)", type(exc).__name__)
            except (ValueError, KeyError, TypeError):  # a frame or answer not as documented
                log.warning("discord gateway: malformed data; reconnecting")
            if self._established:  # the session was up: a fresh start for the backoff
                backoff, self._established = self.min_backoff_s, False
            await asyncio.sleep(backoff * (0.5 + random.random() / 2))
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _url(self) -> str:
        if self.session is not None and self.session.resume_url:
            return self.session.resume_url
        client = self._http()
        if client is None:
            raise Reconnect("the REST client is not open")
        response = await client.get("/gateway/bot", headers={"Authorization": f"Bot {self._token}"})
        if response.status_code == 401:
            raise Fatal("401 from GET /gateway/bot (SB_DISCORD_BOT_TOKEN)")
        response.raise_for_status()
        url = response.json().get("url")
        if not isinstance(url, str) or not url.startswith(("wss://", "ws://")):
            raise ValueError("GET /gateway/bot gave no URL")
        return url

    async def _connect(self) -> None:
        url = await self._url()
        async with connect(
            f"{url.rstrip('/')}/?v=10&encoding=json", max_size=8 * 2**20, open_timeout=30
        ) as ws:
            self.connections += 1
            heartbeat: asyncio.Task[None] | None = None
            try:
                hello = await self._receive(ws, timeout=30)
                if hello.get("op") != HELLO:
                    raise Reconnect("no HELLO")
                interval = float(hello["d"]["heartbeat_interval"]) / 1000
                self._acked = True
                heartbeat = asyncio.create_task(self._heartbeat(ws, interval))
                await self._start_session(ws)
                while True:
                    await self._handle(ws, await self._receive(ws))
            finally:
                if heartbeat is not None:
                    heartbeat.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await heartbeat  # its failure is the connection's, handled here
                self._closed(ws.close_code)

    async def _receive(self, ws: ClientConnection, timeout: float | None = None) -> dict[str, Any]:
        raw = await asyncio.wait_for(ws.recv(), timeout)
        payload = jsonsafe.loads(raw)  # JsonRefused is a ValueError: reconnect (run)
        if not isinstance(payload, dict):
            raise ValueError("a gateway frame is not an object")
        return payload

    async def _start_session(self, ws: ClientConnection) -> None:
        if self.session is not None and self.seq is not None:
            data = {"token": self._token, "session_id": self.session.id, "seq": self.seq}
            await _send(ws, RESUME, data)
            return
        self.session, self.seq = None, None
        properties = {"os": "linux", "browser": "switchboard", "device": "switchboard"}
        await _send(
            ws, IDENTIFY, {"token": self._token, "intents": INTENTS, "properties": properties}
        )

    async def _heartbeat(self, ws: ClientConnection, interval: float) -> None:
        await asyncio.sleep(interval * random.random())
        while True:
            if not self._acked:  # a zombie connection: resume on a new one
                await ws.close(RESUME_CLOSE, "heartbeat not acknowledged")
                return
            self._acked = False
            await _send(ws, HEARTBEAT, self.seq)
            await asyncio.sleep(interval)

    async def _handle(self, ws: ClientConnection, payload: dict[str, Any]) -> None:
        op = payload.get("op")
        if op == HEARTBEAT_ACK:
            self._acked = True
        elif op == HEARTBEAT:
            await _send(ws, HEARTBEAT, self.seq)
        elif op == RECONNECT:
            await ws.close(RESUME_CLOSE, "reconnect asked")
            raise Reconnect("Discord asked to reconnect")
        elif op == INVALID_SESSION:
            if payload.get("d") is not True:
                self.session, self.seq = None, None
                await asyncio.sleep(random.uniform(*self.new_session_pause_s))
            await ws.close(RESUME_CLOSE, "invalid session")
            raise Reconnect("invalid session")
        elif op == DISPATCH:
            await self._dispatch(ws, payload)

    async def _dispatch(self, ws: ClientConnection, payload: dict[str, Any]) -> None:
        kind, data, seq = payload.get("t"), payload.get("d"), payload.get("s")
        if kind == "READY" and isinstance(data, dict):
            user = data.get("user")
            self.bot_id = str(user.get("id") or "") if isinstance(user, dict) else ""
            resume = str(data.get("resume_gateway_url") or "")
            self.session = Session(str(data.get("session_id") or ""), resume)
            self._established = True
            log.info("discord gateway ready as %s", self.bot_id)
        elif kind == "RESUMED":
            self._established = True
            log.info("discord gateway session resumed")
        elif kind == "MESSAGE_CREATE" and isinstance(data, dict):
            try:
                await self._publish(data)
            except ChannelError as exc:
                log.warning("discord message skipped: %s", exc.message)
            except Exception as exc:  # the bus: resume from before this event, Discord replays
                log.warning("discord message not published (%s)", type(exc).__name__)
                await ws.close(RESUME_CLOSE, "publish failed")
                raise Reconnect("publish failed") from None
        if isinstance(seq, int):
            self.seq = seq

    async def _publish(self, data: dict[str, Any]) -> None:
        message = parse_message(data, self.bot_id)
        if message is None:
            return
        message.channel, message.account = "discord", self.account
        await self.publish(message)

    def _closed(self, code: int | None) -> None:
        if code in FATAL:
            raise Fatal(f"{code} {FATAL[code]}")
        if code in NEW_SESSION:
            self.session, self.seq = None, None


async def _send(ws: ClientConnection, op: int, data: Any) -> None:
    await ws.send(json.dumps({"op": op, "d": data}))


async def start_gateway(
    rt: ServiceRuntime,
    token: str,
    http: Callable[[], httpx.AsyncClient | None],
    *,
    account: str = "default",
    retry_s: float = 3.0,
    on_publish: OnPublish | None = None,
) -> tuple[LeasedWork, DiscordGatewayConnection]:
    """The connection running on this replica whenever it holds the account's lease
    (``stop()`` the work on close); ``on_publish`` hears of each message just before it is
    published."""
    conversations = Conversations(rt.nc, rt.js, rt.subjects)

    async def publish(message: messages_pb2.InboundMessage) -> bool:
        if on_publish is not None:
            on_publish(message)
        return await conversations.publish(message)

    connection = DiscordGatewayConnection(token, http, publish, account=account)
    kv = await rt.js.key_value(rt.subjects.channel_lease_bucket)
    work = LeasedWork(
        kv,
        lease_key("discord", account),
        f"{rt.instance}:{uuid.uuid4().hex[:8]}",
        connection.run,
        channel="discord",
        account=account,
        ttl_s=await bucket_ttl(kv),
        retry_s=retry_s,
    )
    work.start()
    return work, connection
