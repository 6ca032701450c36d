"""Inbound security (DESIGN.md section 9): whether a message may reach an agent at all, decided
before it is routed. Refused messages are counted (``sb_router_refused_total{channel,reason}``)
and never run.

Built here (settings in :mod:`switchboard_router.config`):

- **DM policy** for direct messages (``chat.type`` other than ``group``), per channel or for
  all: ``open`` admits every sender; ``allowlist`` admits only the sender ids of the channel's
  ``SB_<CHANNEL>_ALLOW_FROM`` (reason ``not_allowed`` otherwise).
- ``pairing`` is the default, but **pairing codes are not built yet**: for now ``pairing``
  behaves as ``allowlist`` and refuses an unknown sender with reason ``pairing_required``
  (no code is issued, so such a sender stays refused until added to the allow list).
- **Group activation**: under ``mention`` (default) a group message runs only when it
  mentions the bot (reason ``not_mentioned`` otherwise); ``always`` runs every group message.
- The first-party channels ``api``, ``openai``, ``webchat`` and ``hooks`` are authenticated by
  the gateway (its token) and are never subject to these policies.

Still to be built: pairing codes and their approval, per-sender rate limits, group allowlists,
bindings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from switchboard.v1 import messages_pb2

from .config import DmPolicy, GroupActivation, RouterSettings

# Channels the gateway authenticates itself (its bearer token or a paired device).
AUTHENTICATED_CHANNELS = frozenset({"api", "openai", "webchat", "hooks"})

NOT_ALLOWED = "not_allowed"
PAIRING_REQUIRED = "pairing_required"
NOT_MENTIONED = "not_mentioned"


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str = ""  # why a message was refused: a metric label and a log line

    @classmethod
    def admit(cls) -> Admission:
        return cls(True)

    @classmethod
    def refuse(cls, reason: str) -> Admission:
        return cls(False, reason)


class InboundPolicy(Protocol):
    async def admit(self, msg: messages_pb2.InboundMessage) -> Admission: ...


class OpenPolicy:
    """Every sender reaches the agent (no security at all: tests of routing only)."""

    async def admit(self, msg: messages_pb2.InboundMessage) -> Admission:
        return Admission.admit()


class ChannelPolicy:
    """The DM policy and group activation of the router's settings."""

    def __init__(self, settings: RouterSettings) -> None:
        self.settings = settings

    async def admit(self, msg: messages_pb2.InboundMessage) -> Admission:
        return self.decide(msg)

    def decide(self, msg: messages_pb2.InboundMessage) -> Admission:
        channel = msg.channel
        if channel in AUTHENTICATED_CHANNELS:
            return Admission.admit()
        if msg.chat.type == "group":
            activation = self.settings.group_activation_for(channel)
            if activation is GroupActivation.MENTION and not msg.mentions_bot:
                return Admission.refuse(NOT_MENTIONED)
            return Admission.admit()
        policy = self.settings.dm_policy_for(channel)
        if policy is DmPolicy.OPEN:
            return Admission.admit()
        sender = msg.sender or msg.chat.id  # the DM's peer, as routing.resolve takes it
        if sender and sender in self.settings.channel(channel).allow_from:
            return Admission.admit()
        return Admission.refuse(PAIRING_REQUIRED if policy is DmPolicy.PAIRING else NOT_ALLOWED)
