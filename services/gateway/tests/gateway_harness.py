"""The gateway as its service builds it, against a real nats-server, with a fake chat platform.

``async with started(nats_url, home) as gw`` gives a :class:`Gateway`: the gateway's
ServiceRuntime entered as ``serve()`` enters it, ``create_app(settings, rt, {fake.name: fake})``
with its lifespan running, an httpx client on it (ASGI, no socket) and a :class:`FakeChannel`
standing for a third-party chat platform. No agent or router listens at ``settings.agent_addr`` and
``router_addr`` (bound sockets that never listen): their gRPC is absent in these tests.

(Not a conftest.py: mypy would name it ``tests.conftest``, the name it gives
services/tools/tests/conftest.py.)
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket
import uuid
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from switchboard import registry
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.app import create_app
from switchboard_gateway.channels.base import (
    BadPayload,
    Inbound,
    InboundRequest,
    PlatformMessage,
    Unauthorized,
)
from switchboard_gateway.config import GatewaySettings
from tests.support.streams import stored as stream_messages

SIGNATURE = "x-fake-signature"


class FakeChannel:
    """A chat platform as an adapter sees it. Webhooks carry ``X-Fake-Signature:
    sha256=<hex HMAC of the raw body>`` and a JSON body ``{"updates": [{"id", "from", "chat",
    "text"}]}`` or ``{"challenge": "..."}`` (answered synchronously, like Slack's URL check).
    Replies are sent as platform messages of at most ``limit`` characters; ``script`` makes
    sends of a given text raise (one exception per attempt, ``None`` for success) and
    ``forever`` makes them always raise."""

    def __init__(
        self,
        name: str = "fakechat",
        limit: int = 4096,
        accounts: Collection[str] = ("default", "acct", "acct1", "acct2"),
    ) -> None:
        self.name = name
        self.accounts = accounts
        self.secret = uuid.uuid4().bytes
        self.limit = limit
        self.parsed: list[InboundRequest] = []
        self.attempts: list[tuple[str, PlatformMessage]] = []  # every send call
        self.sent: list[tuple[str, PlatformMessage]] = []  # the sends that succeeded
        self.script: dict[str, list[Exception | None]] = {}
        self.forever: dict[str, Exception] = {}
        self.typed: list[tuple[str, str]] = []
        self.started = False

    # --- the platform's side ---------------------------------------------------------------

    def sign(self, body: bytes) -> str:
        return "sha256=" + hmac.new(self.secret, body, hashlib.sha256).hexdigest()

    def webhook(self, payload: object) -> tuple[bytes, dict[str, str]]:
        """A signed webhook call: its raw body and headers."""
        body = json.dumps(payload).encode()
        return body, {SIGNATURE: self.sign(body), "content-type": "application/json"}

    def texts_sent(self) -> list[str]:
        return [str(m.payload["text"]) for _, m in self.sent]

    # --- the adapter -----------------------------------------------------------------------

    async def start(self, rt: ServiceRuntime) -> None:
        self.started = True

    async def close(self) -> None:
        self.started = False

    async def typing(self, account: str, chat: messages_pb2.ChatRef, thread_id: str) -> None:
        self.typed.append((account, chat.id))

    def verify(self, request: InboundRequest) -> None:
        given = request.headers.get(SIGNATURE, "")
        if not hmac.compare_digest(given.encode(), self.sign(request.body).encode()):
            raise Unauthorized("bad signature")

    def parse(self, request: InboundRequest) -> Inbound:
        self.parsed.append(request)
        try:
            body = json.loads(request.body)
        except ValueError as exc:
            raise BadPayload(f"not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise BadPayload("expected a JSON object")
        if "challenge" in body:
            return Inbound(reply={"challenge": str(body["challenge"])})
        updates = body.get("updates")
        if not isinstance(updates, list):
            raise BadPayload("no updates")
        messages = []
        for u in updates:
            if not isinstance(u, dict) or not {"id", "from", "chat", "text"} <= u.keys():
                raise BadPayload("an update lacks id, from, chat or text")
            chat = str(u["chat"])
            messages.append(
                messages_pb2.InboundMessage(
                    sender=str(u["from"]),
                    chat=messages_pb2.ChatRef(
                        id=chat, type="direct" if chat == str(u["from"]) else "group"
                    ),
                    text=str(u["text"]),
                    message_id=str(u["id"]),
                )
            )
        return Inbound(messages=messages)

    def format(self, part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
        pieces = [part.text[i : i + self.limit] for i in range(0, len(part.text), self.limit)]
        return [
            PlatformMessage({"chat_id": part.chat.id, "text": piece, "reply_to": part.reply_to})
            for piece in pieces
        ]

    async def send(self, account: str, message: PlatformMessage) -> None:
        self.attempts.append((account, message))
        text = str(message.payload["text"])
        if text in self.forever:
            raise self.forever[text]
        planned = self.script.get(text)
        if planned:
            outcome = planned.pop(0)
            if outcome is not None:
                raise outcome
        self.sent.append((account, message))


Published = tuple[str, str, messages_pb2.InboundMessage]  # (Nats-Msg-Id, subject, message)


@dataclass
class Gateway:
    settings: GatewaySettings
    rt: ServiceRuntime
    app: FastAPI
    client: httpx.AsyncClient
    fake: FakeChannel
    token: str = field(repr=False)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def inbound(self) -> list[Published]:
        """What the INBOUND stream holds, in order."""
        stream = self.rt.subjects.stream("INBOUND")
        found = await stream_messages(self.rt.js, stream, messages_pb2.InboundMessage)
        return [(s.msg_id, s.subject, s.message) for s in found]


@contextmanager
def absent_address() -> Iterator[str]:
    """A port that is bound but never listens: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def client_on(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")


@asynccontextmanager
async def started(nats_url: str, home: Path, **overrides: Any) -> AsyncIterator[Gateway]:
    """The gateway on ``nats_url``; ``overrides``: settings (read from an empty environment,
    so none of the machine's SB_* variables leak in)."""
    token = f"gw-{uuid.uuid4().hex}"
    with absent_address() as agent_addr, absent_address() as router_addr:
        values: dict[str, Any] = {
            "home": home,
            "nats_url": nats_url,
            "gateway_token": token,
            "agent_addr": agent_addr,
            "router_addr": router_addr,
            "reply_timeout_s": 0.5,
            "log_json": False,
        }
        settings = GatewaySettings.from_environ({}, **{**values, **overrides})
        stop = asyncio.Event()
        async with ServiceRuntime(registry.get("gateway"), settings, stop) as rt:
            fake = FakeChannel()
            app = create_app(settings, rt, {fake.name: fake})
            async with app.router.lifespan_context(app), client_on(app) as client:
                yield Gateway(settings, rt, app, client, fake, token)
            stop.set()
