"""The interface of a chat channel adapter (docs/adding-a-channel.md): verify a platform's
webhook, parse it into normalized inbound messages, and format and send reply parts back.

An adapter is one file in this package; the gateway serves its webhook at
``POST /channels/<channel>/<account>`` and delivers its ``OUTBOUND`` parts (see
:mod:`switchboard_gateway.delivery`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2


@dataclass(frozen=True)
class InboundRequest:
    """A webhook call as it arrived: the raw body (signatures cover the exact bytes) and the
    headers with lower-case names."""

    channel: str
    account: str
    headers: Mapping[str, str]
    body: bytes
    received_at_ms: int


@dataclass(frozen=True)
class Inbound:
    """What a webhook call carries: messages for the agent (each with the platform's own
    ``message_id``), and the platform's synchronous answer if it expects one (Slack's
    ``url_verification`` challenge, Discord's PONG); ``None`` answers ``{"ok": true}``."""

    messages: Sequence[messages_pb2.InboundMessage] = ()
    reply: dict[str, Any] | None = None


class ChannelError(Exception):
    """A webhook call refused with a 4xx; the message is safe to show to the caller."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unauthorized(ChannelError):
    """The call does not carry the platform's valid signature or secret."""

    status = 401


class BadPayload(ChannelError):
    """The body is not what the platform sends."""

    status = 400


@dataclass
class RetryLater(Exception):
    """The platform is busy or down (429, 5xx): try again after ``retry_after_s``."""

    reason: str
    retry_after_s: float = 1.0


class Undeliverable(Exception):
    """The platform refused the part for good (a chat that no longer exists, say)."""


@dataclass(frozen=True)
class PlatformMessage:
    """One call to the platform's send API: a part may need several (length limits)."""

    payload: dict[str, Any] = field(default_factory=dict)


class ChannelAdapter(Protocol):
    """A channel's adapter. It should also name the accounts it is configured with
    (:class:`DeclaresAccounts`, as every built-in adapter does): a webhook call to any other
    account is then 404 before any verification work."""

    name: str  # the channel: "telegram", "slack", ...

    async def start(self, rt: ServiceRuntime) -> None:
        """Open clients, register webhooks, start background work (polling under a lease...)."""
        ...

    async def close(self) -> None:
        """Stop background work and close clients."""
        ...

    async def typing(self, account: str, chat: messages_pb2.ChatRef, thread_id: str) -> None:
        """Show that a reply is being written (best effort: failures are ignored)."""
        ...

    def verify(self, request: InboundRequest) -> None:
        """Raise :class:`Unauthorized` unless the platform signed or authenticated the call."""
        ...

    def parse(self, request: InboundRequest) -> Inbound:
        """The messages in a verified call; :class:`BadPayload` for a malformed body."""
        ...

    def format(self, part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
        """The platform calls that deliver one reply part (markup, length limits, thread)."""
        ...

    async def send(self, account: str, message: PlatformMessage) -> None:
        """Make one call; :class:`RetryLater` or :class:`Undeliverable` when it fails."""
        ...


@runtime_checkable
class DeclaresAccounts(Protocol):
    """An adapter that names its accounts (``accounts = ("default",)``). Not a member of
    :class:`ChannelAdapter` itself so that a plugin's adapter written before it still loads."""

    @property
    def accounts(self) -> Collection[str]: ...


def served_accounts(adapter: ChannelAdapter) -> Collection[str] | None:
    """The accounts whose webhooks ``adapter`` serves; None for an adapter that does not say
    (a plugin's written before adapters declared them: every account reaches its ``verify``)."""
    return adapter.accounts if isinstance(adapter, DeclaresAccounts) else None


OnPublish = Callable[[messages_pb2.InboundMessage], None]


@runtime_checkable
class PublishesItself(Protocol):
    """An adapter that publishes inbound messages itself (Telegram's polling, Discord's
    gateway connection) rather than through the webhook route: the gateway sets
    ``on_publish`` before ``start`` to learn of each one (typing indicators) just before it
    is published: the run it starts can begin before the publish's ack is back."""

    on_publish: OnPublish | None
