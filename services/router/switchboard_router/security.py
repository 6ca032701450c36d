"""Inbound security (docs/trust.md): whether a message may reach an agent
at all, decided before it is routed, and the role (``InboundMessage.role``) of the sender it
admits. Refused messages are counted (``sb_router_refused_total{channel,reason}``) and never
run.

Built here (settings in :mod:`switchboard_router.config`):

- **DM policy** for direct messages (``chat.type`` other than ``group``), per channel or for
  all: ``open`` admits every sender; ``allowlist`` admits only the sender ids of the channel's
  ``SB_<CHANNEL>_ALLOW_FROM`` (reason ``not_allowed`` otherwise).
- ``pairing`` (the default) admits the allow list and the senders an operator approved; an
  unknown sender gets a pairing code in its chat (once per pending request) and is refused with
  reason ``pairing_required`` (``pairing_limit`` when too many requests are pending). See
  :mod:`switchboard_router.pairing`.
- **Owners** (``SB_OWNERS``, ``SB_APPROVERS``) pass every DM policy; in groups they pass the
  sender allowlist, not the group policy (a group's transcript holds what everyone wrote).
- **Group policy** for group chats, first: ``allowlist`` (the default) admits the group ids of
  ``SB_<CHANNEL>_GROUPS`` (reason ``group_not_allowed``); ``pairing`` also the groups an
  operator approved, and a message that would otherwise run in an unknown group posts a
  pairing code for the group into it (reason ``group_pairing_required``, or
  ``pairing_limit``); ``open`` admits every group.
- **Group sender allowlist**, second: with ``SB_<CHANNEL>_GROUP_ALLOW_FROM`` only those senders
  (and owners) are heard in an admitted group (reason ``sender_not_allowed``).
- **Group activation**, last: under ``mention`` (default) a group message runs only when it
  mentions the bot (reason ``not_mentioned``); ``always`` runs every group message.
- The first-party channels ``api``, ``openai``, ``webchat``, ``a2a`` and ``hooks`` are
  authenticated by the gateway (its token), and ``cron`` carries the scheduler's fired jobs:
  they are never subject to these policies.
- **Accounts**: a channel with several accounts (two Telegram bots, two Slack workspaces: the
  message's ``account``) applies the channel's settings to each, except where the channel's
  ``accounts`` entry for one gives its own (``ChannelSecurity.accounts``); a pairing is per
  account (a sender or group approved on one bot is a stranger to the others). Owners are
  owners on every account of their channel.
- **Rate limits** per sender on chat channels (:mod:`switchboard_router.ratelimit`): over
  the limit, reason ``rate_limited``.

**Roles** (``trust.channel_role``, ``trust.chat_role``): a first-party channel's own; in a
chat, ``owner`` for a sender in ``SB_OWNERS``/``SB_APPROVERS`` or paired as an owner, else
``user`` in a DM and ``member`` in a group. What the pairing store says costs one KV get, asked
at most once per message:

- in a DM, only where the DM path looks the sender up anyway (policy ``pairing``, a sender not
  in ``SB_<CHANNEL>_ALLOW_FROM``): no DM costs a lookup it did not cost before. A sender paired
  ``--owner`` under ``pairing`` is an owner; under ``open`` or ``allowlist`` (or once
  allow-listed) nobody pairs, so name owners there in ``SB_OWNERS``;
- in a group, for a message that runs (it passed the group policy and mention gating), and for
  a mentioned message of a sender the group's allowlist does not name (owners pass it): an
  owner paired ``--owner`` is an owner in the groups the policy admits (their ``/approve``
  counts there). Chatter that does not run never costs a lookup; one that runs costs a model
  run, next to which a KV get is nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from switchboard import trust
from switchboard.v1 import messages_pb2, router_pb2

from .config import DmPolicy, GroupActivation, GroupPolicy, RouterSettings
from .pairing import PairingStore, group_sender, is_group
from .ratelimit import RateLimiter

# Sends a new pairing request's code to the chat that asked (a DM, or the group).
Notify = Callable[[messages_pb2.InboundMessage, router_pb2.PairingRequest], Awaitable[None]]

# Channels the gateway authenticates itself (its bearer token or a paired device), and the
# scheduler's system events ("cron"): only the gateway's and the scheduler's NATS users may
# publish inbound subjects (switchboard.natsauth).
AUTHENTICATED_CHANNELS = trust.AUTHENTICATED_CHANNELS

NOT_ALLOWED = "not_allowed"
PAIRING_REQUIRED = "pairing_required"
PAIRING_LIMIT = "pairing_limit"
RATE_LIMITED = "rate_limited"
NOT_MENTIONED = "not_mentioned"
GROUP_NOT_ALLOWED = "group_not_allowed"
GROUP_PAIRING_REQUIRED = "group_pairing_required"
SENDER_NOT_ALLOWED = "sender_not_allowed"


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str = ""  # why a message was refused: a metric label and a log line
    role: str = ""  # the admitted sender's role (trust.Role), stamped on the message

    @classmethod
    def admit(cls, role: trust.Role) -> Admission:
        return cls(True, role=str(role))

    @classmethod
    def refuse(cls, reason: str) -> Admission:
        return cls(False, reason)


class InboundPolicy(Protocol):
    async def admit(self, msg: messages_pb2.InboundMessage) -> Admission: ...


class _Sender:
    """The sender of one chat message: an owner by configuration, or as the pairing store says
    (asked at most once)."""

    def __init__(
        self,
        store: PairingStore | None,
        msg: messages_pb2.InboundMessage,
        sender: str,
        configured: bool,
    ) -> None:
        self.store = store
        self.channel = msg.channel
        self.account = msg.account
        self.id = sender
        self.configured = configured
        self._paired: router_pb2.PairedSender | None = None
        self._asked = store is None or not sender

    async def paired(self) -> router_pb2.PairedSender | None:
        if not self._asked:
            assert self.store is not None
            self._paired = await self.store.paired_sender(self.channel, self.id, self.account)
            self._asked = True
        return self._paired

    async def owner(self, ask: bool = True) -> bool:
        """``ask``: look the sender up if nobody has yet (else only what is known)."""
        if self.configured:
            return True
        paired = await self.paired() if ask else self._paired
        return paired is not None and paired.role == trust.Role.OWNER


class ChannelPolicy:
    """The DM and group policies of the router's settings; with a pairing store, the
    ``pairing`` policies issue codes (``notify`` sends them) and admit approved senders and
    groups."""

    def __init__(
        self,
        settings: RouterSettings,
        pairing: PairingStore | None = None,
        notify: Notify | None = None,
    ) -> None:
        self.settings = settings
        self.pairing = pairing
        self.notify = notify
        self.owners = settings.owner_identities()
        self.limiter = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)

    def reload(self, settings: RouterSettings) -> None:
        """New policies, allowlists and owners (the configuration file changed); the rate
        limiter keeps its buckets (its settings need a restart)."""
        self.settings = settings
        self.owners = settings.owner_identities()

    async def admit(self, msg: messages_pb2.InboundMessage) -> Admission:
        first_party = trust.channel_role(msg.channel)
        if first_party is not None:
            return Admission.admit(first_party)
        sender_id = msg.sender or msg.chat.id  # the DM's peer, as routing.resolve takes it
        configured = bool(sender_id) and trust.identity(msg.channel, sender_id) in self.owners
        sender = _Sender(self.pairing, msg, sender_id, configured)
        group = msg.chat.type == "group"
        refused = await (self._group(msg, sender) if group else self._direct(msg, sender))
        if refused is not None:
            return Admission.refuse(refused)
        if not self.limiter.allow(msg.channel, sender_id):
            return Admission.refuse(RATE_LIMITED)
        # a DM: only what the DM path looked up (see the module's docstring)
        return Admission.admit(trust.chat_role(await sender.owner(ask=group), group))

    async def _direct(self, msg: messages_pb2.InboundMessage, sender: _Sender) -> str | None:
        """None when the DM policy admits the sender, else the reason it is refused."""
        policy = self.settings.dm_policy_for(msg.channel, msg.account)
        if sender.configured or policy is DmPolicy.OPEN:
            return None
        if sender.id and sender.id in self.settings.channel(msg.channel, msg.account).allow_from:
            return None
        if policy is DmPolicy.ALLOWLIST:
            return NOT_ALLOWED
        if self.pairing is None or not sender.id or is_group(sender.id):
            return PAIRING_REQUIRED  # a sender named like a group never pairs as one
        if await sender.paired() is not None:
            return None
        return await self._ask(msg, sender.id, PAIRING_REQUIRED)

    async def _group(self, msg: messages_pb2.InboundMessage, sender: _Sender) -> str | None:
        """None when the group policy, the group's sender allowlist and mention gating admit
        the message, else the reason of the first that refuses it."""
        channel, account = msg.channel, msg.account
        security = self.settings.channel(channel, account)
        mentioned = msg.mentions_bot or (
            self.settings.group_activation_for(channel, account) is GroupActivation.ALWAYS
        )
        listed = (
            sender.configured
            or not security.group_allow_from
            or sender.id in security.group_allow_from
        )
        policy = self.settings.group_policy_for(channel, account)
        if policy is not GroupPolicy.OPEN and msg.chat.id not in security.groups:
            if policy is GroupPolicy.ALLOWLIST or not msg.chat.id:
                return GROUP_NOT_ALLOWED
            if self.pairing is None:
                return GROUP_PAIRING_REQUIRED
            if not await self.pairing.is_paired(channel, group_sender(msg.chat.id), account):
                # Only a message that would run asks: chatter makes no requests.
                if mentioned and (listed or await sender.owner()):
                    return await self._ask(msg, group_sender(msg.chat.id), GROUP_PAIRING_REQUIRED)
                return GROUP_PAIRING_REQUIRED
        if not listed and (not mentioned or not await sender.owner()):
            # Unmentioned, it would not run anyway: refused without asking the pairing store.
            return SENDER_NOT_ALLOWED
        if not mentioned:
            return NOT_MENTIONED
        return None

    async def _ask(self, msg: messages_pb2.InboundMessage, who: str, reason: str) -> str:
        """Record (or find) the pending pairing request of ``who`` (a sender, or
        ``group:<chat id>``), send its code when it is new; the refusal reason."""
        assert self.pairing is not None
        asked = await self.pairing.ask(msg, who)
        if asked.limited:
            return PAIRING_LIMIT
        if asked.new and asked.request is not None and self.notify is not None:
            await self.notify(msg, asked.request)
        return reason
