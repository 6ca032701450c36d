"""Route resolution (DESIGN.md section 6.1): an inbound message -> agent + session key."""

from __future__ import annotations

import re
from dataclasses import dataclass

from switchboard.sessions import validate_session_key
from switchboard.v1 import messages_pb2

AGENT_ID = re.compile(r"^[a-z0-9_-]{1,64}$")


class RouteError(ValueError):
    """The message cannot be routed; the text says why."""


@dataclass(frozen=True)
class Route:
    agent: str
    session_key: str


def resolve(msg: messages_pb2.InboundMessage, default_agent: str) -> Route:
    agent = msg.agent or default_agent
    if not AGENT_ID.match(agent):
        raise RouteError(f"invalid agent id {agent!r}")
    if msg.session_key:
        key = msg.session_key
    elif msg.chat.type == "group":
        if not msg.chat.id:
            raise RouteError("group message without a chat id")
        key = f"{agent}:{msg.channel}:group:{msg.chat.id}"
    else:
        peer = msg.sender or msg.chat.id
        if not peer:
            raise RouteError("direct message without a sender")
        key = f"{agent}:{msg.channel}:{peer}"
    try:
        return Route(agent=agent, session_key=validate_session_key(key))
    except ValueError as exc:
        raise RouteError(str(exc)) from exc
