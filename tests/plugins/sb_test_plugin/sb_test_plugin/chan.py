"""``sbchan``: the chat channel ``filechat`` in the gateway. Its webhook takes
``{"id", "from", "text"}`` with the header ``x-filechat-secret`` (the configured ``secret``);
its replies are appended to the configured ``outbox`` file, one JSON line per message."""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from switchboard_gateway.plugin_api import (
    BadPayload,
    GatewayPluginApi,
    Inbound,
    InboundRequest,
    Manifest,
    PlatformMessage,
    Unauthorized,
    messages_pb2,
)

SCHEMA = {
    "type": "object",
    "properties": {"secret": {"type": "string"}, "outbox": {"type": "string"}},
    "required": ["secret", "outbox"],
}


class FileChat:
    name = "filechat"

    def __init__(self, secret: str, outbox: Path) -> None:
        self.secret = secret
        self.outbox = outbox

    async def start(self, rt: Any) -> None:
        self.outbox.parent.mkdir(parents=True, exist_ok=True)

    async def close(self) -> None:
        return None

    async def typing(self, account: str, chat: messages_pb2.ChatRef, thread_id: str) -> None:
        return None

    def verify(self, request: InboundRequest) -> None:
        given = request.headers.get("x-filechat-secret", "")
        if not hmac.compare_digest(given.encode(), self.secret.encode()):
            raise Unauthorized("Wrong or missing x-filechat-secret.")

    def parse(self, request: InboundRequest) -> Inbound:
        body = json.loads(request.body)  # a ValueError: the gateway refuses the call (400)
        if not isinstance(body, dict) or not str(body.get("text", "")):
            raise BadPayload("A filechat call needs a text.")
        sender = str(body["from"])
        message = messages_pb2.InboundMessage(
            sender=sender,
            chat=messages_pb2.ChatRef(id=sender, type="direct"),
            text=str(body["text"]),
            message_id=str(body["id"]),
        )
        return Inbound([message])

    def format(self, part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
        return [PlatformMessage({"account": part.account, "to": part.chat.id, "text": part.text})]

    async def send(self, account: str, message: PlatformMessage) -> None:
        with self.outbox.open("a") as out:
            out.write(json.dumps(message.payload) + "\n")


class ChannelPlugin:
    manifest = Manifest("sbchan", "0.1.0", frozenset({"channels"}), config_schema=SCHEMA)

    def setup(self, api: GatewayPluginApi) -> None:
        api.register_channel("filechat", FileChat(api.config["secret"], Path(api.config["outbox"])))


plugin = ChannelPlugin()
