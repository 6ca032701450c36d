"""Route resolution (DESIGN.md section 6.1): an inbound message -> agent + session key."""

from __future__ import annotations

from dataclasses import dataclass

from switchboard.errors import InvalidAgentId, InvalidSessionKey
from switchboard.sessions import direct_key, group_key, validate_agent_id, validate_session_key
from switchboard.v1 import messages_pb2


class RouteError(ValueError):
    """The message cannot be routed; the text says why."""


@dataclass(frozen=True)
class Route:
    agent: str
    session_key: str


def resolve(msg: messages_pb2.InboundMessage, default_agent: str) -> Route:
    try:
        agent = validate_agent_id(msg.agent or default_agent)
        if msg.session_key:
            return Route(agent, validate_session_key(msg.session_key))
        if msg.chat.type == "group":
            if not msg.chat.id:
                raise RouteError("group message without a chat id")
            return Route(agent, group_key(agent, msg.channel, msg.chat.id))
        peer = msg.sender or msg.chat.id
        if not peer:
            raise RouteError("direct message without a sender")
        return Route(agent, direct_key(agent, msg.channel, peer))
    except (InvalidAgentId, InvalidSessionKey) as exc:
        raise RouteError(str(exc)) from exc
