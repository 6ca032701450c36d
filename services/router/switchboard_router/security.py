"""Inbound security (DESIGN.md section 9): whether a message may reach an agent at all, decided
before it is routed. Refused messages are counted (``sb_router_refused_total{channel,reason}``)
and never run.

Built here (settings in :mod:`switchboard_router.config`):

- **DM policy** for direct messages (``chat.type`` other than ``group``), per channel or for
  all: ``open`` admits every sender; ``allowlist`` admits only the sender ids of the channel's
  ``SB_<CHANNEL>_ALLOW_FROM`` (reason ``not_allowed`` otherwise).
- ``pairing`` (the default) admits the allow list and the senders an operator approved; an
  unknown sender gets a pairing code in its chat (once per pending request) and is refused with
  reason ``pairing_required`` (``pairing_limit`` when too many requests are pending). See
  :mod:`switchboard_router.pairing`.
- **Group activation**: under ``mention`` (default) a group message runs only when it
  mentions the bot (reason ``not_mentioned`` otherwise); ``always`` runs every group message.
- The first-party channels ``api``, ``openai``, ``webchat`` and ``hooks`` are authenticated by
  the gateway (its token), and ``cron`` carries the scheduler's fired jobs: they are never
  subject to these policies.

- **Rate limits** per sender on chat channels (:mod:`switchboard_router.ratelimit`): over
  the limit, reason ``rate_limited``.

Still to be built: group allowlists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from switchboard.v1 import messages_pb2, router_pb2

from .config import DmPolicy, GroupActivation, RouterSettings
from .pairing import PairingStore
from .ratelimit import RateLimiter

# Sends a new pairing request's code to the sender's chat.
Notify = Callable[[messages_pb2.InboundMessage, router_pb2.PairingRequest], Awaitable[None]]

# Channels the gateway authenticates itself (its bearer token or a paired device), and the
# scheduler's system events ("cron"): only the gateway's and the scheduler's NATS users may
# publish inbound subjects (switchboard.natsauth).
AUTHENTICATED_CHANNELS = frozenset({"api", "openai", "webchat", "hooks", "cron", "a2a"})

NOT_ALLOWED = "not_allowed"
PAIRING_REQUIRED = "pairing_required"
PAIRING_LIMIT = "pairing_limit"
RATE_LIMITED = "rate_limited"
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
    """The DM policy and group activation of the router's settings; with a pairing store, the
    ``pairing`` policy issues codes (``notify`` sends them) and admits approved senders."""

    def __init__(
        self,
        settings: RouterSettings,
        pairing: PairingStore | None = None,
        notify: Notify | None = None,
    ) -> None:
        self.settings = settings
        self.pairing = pairing
        self.notify = notify
        self.limiter = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)

    async def admit(self, msg: messages_pb2.InboundMessage) -> Admission:
        decided = await self._admit(msg)
        if not decided.admitted or msg.channel in AUTHENTICATED_CHANNELS:
            return decided
        if not self.limiter.allow(msg.channel, msg.sender or msg.chat.id):
            return Admission.refuse(RATE_LIMITED)
        return decided

    async def _admit(self, msg: messages_pb2.InboundMessage) -> Admission:
        decided = self.decide(msg)
        if decided.reason != PAIRING_REQUIRED or self.pairing is None:
            return decided
        sender = msg.sender or msg.chat.id
        if not sender:
            return decided
        if await self.pairing.is_paired(msg.channel, sender):
            return Admission.admit()
        asked = await self.pairing.ask(msg, sender)
        if asked.limited:
            return Admission.refuse(PAIRING_LIMIT)
        if asked.new and asked.request is not None and self.notify is not None:
            await self.notify(msg, asked.request)
        return decided

    def decide(self, msg: messages_pb2.InboundMessage) -> Admission:
        """The decision of the settings alone (no pairing store)."""
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
