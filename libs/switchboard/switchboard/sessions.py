"""The names every service agrees on: agent ids, session keys (docs/architecture.md), the
NATS-safe tokens that stand for session keys in subjects, and the ``Nats-Msg-Id`` of inbound
messages. Build and parse them here; nothing else spells their formats.

Session keys:

========================================  =========================================
``<agent>:<channel>:<peer>``              a direct conversation with one person
``<agent>:<channel>:group:<chat id>``     a group chat
``hook:<name>``                           a webhook mapping
``cron:<job>``                            a scheduled job
``<parent key>:sub:<id>``                 a sub-agent's session under its parent
========================================  =========================================

On a channel with several accounts (two Telegram bots, two Slack workspaces), a chat's
``<channel>`` is ``<channel>@<account>`` for a named account (:func:`session_channel`): each bot
or workspace its own conversations, memory scopes and standing. The account ``default`` (the
single-account settings) keeps the bare channel.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from .errors import InvalidAgentId, InvalidSessionKey

MAX_KEY_LENGTH = 256
AGENT_ID_PATTERN = r"^[a-z0-9_-]{1,64}$"
_AGENT_ID = re.compile(r"[a-z0-9_-]{1,64}")  # fullmatch: "$" would let a trailing newline in
SUBAGENT_MARKER = ":sub:"
GROUP_MARKER = "group"
DEFAULT_ACCOUNT = "default"  # a channel's single-account settings
ACCOUNT_MARKER = "@"

AgentId = Annotated[str, Field(pattern=AGENT_ID_PATTERN)]
"""An agent id as a pydantic field type (settings and request bodies)."""


def is_agent_id(value: str) -> bool:
    return _AGENT_ID.fullmatch(value) is not None


def validate_agent_id(agent: str) -> str:
    """Return ``agent`` if it is an agent id (1-64 of ``a-z 0-9 _ -``), else raise
    :class:`InvalidAgentId` (a ValueError) saying so."""
    if not is_agent_id(agent):
        raise InvalidAgentId(f"invalid agent id {agent!r}: expected 1-64 characters of a-z 0-9 _ -")
    return agent


def validate_session_key(key: str) -> str:
    """Return ``key`` if it can name a session, else raise :class:`InvalidSessionKey`."""
    if not key:
        raise InvalidSessionKey("session key must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidSessionKey(f"session key must be at most {MAX_KEY_LENGTH} characters")
    if any(c.isspace() or not c.isprintable() for c in key):
        raise InvalidSessionKey("session key must not contain whitespace or control characters")
    return key


def session_channel(channel: str, account: str = "") -> str:
    """The ``<channel>`` of a chat's session key: ``channel`` for the account ``default`` (or
    none), ``<channel>@<account>`` for a named one."""
    if not account or account == DEFAULT_ACCOUNT:
        return channel
    return f"{channel}{ACCOUNT_MARKER}{account}"


def direct_key(agent: str, channel: str, peer: str) -> str:
    """The session of a direct conversation with ``peer`` on ``channel``."""
    return validate_session_key(f"{validate_agent_id(agent)}:{channel}:{peer}")


def group_key(agent: str, channel: str, chat_id: str) -> str:
    """The session of a group chat."""
    return validate_session_key(f"{validate_agent_id(agent)}:{channel}:{GROUP_MARKER}:{chat_id}")


def hook_key(name: str) -> str:
    return validate_session_key(f"hook:{name}")


def cron_key(job: str) -> str:
    return validate_session_key(f"cron:{job}")


def subagent_key(parent: str, child: str) -> str:
    """A sub-agent's session under ``parent`` (sub-agents of sub-agents nest)."""
    return validate_session_key(f"{parent}{SUBAGENT_MARKER}{child}")


def is_subagent(key: str) -> bool:
    return SUBAGENT_MARKER in key


@dataclass(frozen=True)
class SessionKey:
    """A session key taken apart. ``kind`` is ``direct``, ``group``, ``hook``, ``cron``,
    ``sub`` or ``custom`` (any other valid key, e.g. one an API client chose)."""

    key: str
    kind: str
    agent: str = ""  # direct, group (and a sub-agent's root)
    channel: str = ""
    peer: str = ""  # the person (direct) or the chat id (group)
    name: str = ""  # hook or cron job name
    parent: str = ""  # sub: the parent session key

    @property
    def root(self) -> SessionKey:
        """The outermost session (a sub-agent's, through every level of nesting)."""
        return parse_session_key(self.key.split(SUBAGENT_MARKER, 1)[0])


def parse_session_key(key: str) -> SessionKey:
    validate_session_key(key)
    if is_subagent(key):
        parent, _, _ = key.rpartition(SUBAGENT_MARKER)
        root = parse_session_key(key.split(SUBAGENT_MARKER, 1)[0])
        return SessionKey(key, "sub", agent=root.agent, channel=root.channel, parent=parent)
    head, _, rest = key.partition(":")
    if head in ("hook", "cron") and rest:
        return SessionKey(key, head, name=rest)
    parts = key.split(":", 2)
    if len(parts) == 3 and is_agent_id(parts[0]) and parts[1] and parts[2]:
        agent, channel, peer = parts
        group, sep, chat = peer.partition(":")
        if group == GROUP_MARKER and sep and chat:
            return SessionKey(key, "group", agent=agent, channel=channel, peer=chat)
        return SessionKey(key, "direct", agent=agent, channel=channel, peer=peer)
    return SessionKey(key, "custom")


def session_token(key: str) -> str:
    """Encode a session key as one NATS subject token (base64url, no padding)."""
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def session_key_from_token(token: str) -> str:
    padding = "=" * (-len(token) % 4)
    return base64.urlsafe_b64decode(token + padding).decode()


def inbound_msg_id(channel: str, account: str, message_id: str) -> str:
    """``Nats-Msg-Id`` of an inbound message and of the lane item made from it: the platform's
    own id under its channel and account, so a platform's retry is dropped as a duplicate and
    two accounts' equal ids are not."""
    return f"{channel}:{account or 'default'}:{message_id}"
