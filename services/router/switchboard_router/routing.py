"""Route resolution (docs/architecture.md): an inbound message -> agent + session key."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from switchboard.errors import InvalidAgentId, InvalidSessionKey
from switchboard.sessions import (
    direct_key,
    group_key,
    session_channel,
    validate_agent_id,
    validate_session_key,
)
from switchboard.v1 import messages_pb2

AgentFor = Callable[[str, str, str, str], str]


class RouteError(ValueError):
    """The message cannot be routed; the text says why."""


@dataclass(frozen=True)
class Route:
    agent: str
    session_key: str


def resolve(msg: messages_pb2.InboundMessage, default_agent: str | AgentFor) -> Route:
    """``default_agent``: the agent of messages that name none, or a function of (channel,
    account, chat type, chat id) choosing it (the settings' bindings)."""
    try:
        if msg.agent:
            chosen = msg.agent
        elif callable(default_agent):
            peer = msg.chat.id if msg.chat.type == "group" else (msg.sender or msg.chat.id)
            chosen = default_agent(msg.channel, msg.account, msg.chat.type, peer)
        else:
            chosen = default_agent
        agent = validate_agent_id(chosen)
        if msg.session_key:
            return Route(agent, validate_session_key(msg.session_key))
        channel = session_channel(msg.channel, msg.account)  # a named account's own sessions
        if msg.chat.type == "group":
            if not msg.chat.id:
                raise RouteError("group message without a chat id")
            return Route(agent, group_key(agent, channel, msg.chat.id))
        peer = msg.sender or msg.chat.id
        if not peer:
            raise RouteError("direct message without a sender")
        return Route(agent, direct_key(agent, channel, peer))
    except (InvalidAgentId, InvalidSessionKey) as exc:
        raise RouteError(str(exc)) from exc
