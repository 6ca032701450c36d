"""One channel, several accounts (issue 27): :class:`Accounts` is the channel's adapter when it
has more than one bot or workspace, each its own adapter of one account. A webhook call, a
reply part, a typing indicator or an attachment download goes to the adapter of its account,
so a reply leaves through the bot the message came in on, with that bot's token.

The running gateway serves every built-in channel through one, whatever its number of
accounts, since they may change while it serves (:meth:`Accounts.put`, :meth:`Accounts.pop`:
a changed configuration file, :mod:`.live`): a webhook, a reply or a typing indicator goes to
the adapter the account has at that moment, and one for an account it no longer has is refused
(404, Undeliverable)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from switchboard.media import MediaClient
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2

from ..accounts_config import DEFAULT
from ..config import GatewaySettings
from .base import (
    ChannelAdapter,
    Inbound,
    InboundRequest,
    OnPublish,
    PlatformMessage,
    PublishesItself,
    Unauthorized,
    Undeliverable,
)


class OneAccount(ChannelAdapter, Protocol):
    """What the built-in adapters of one account have besides :class:`ChannelAdapter`."""

    media: MediaClient | None
    # Holds a connection under a channel lease (Telegram polling, Discord's gateway): its
    # replacement can take over only once it has stopped (live.py).
    leased: bool

    @property
    def accounts(self) -> Collection[str]: ...


class Spec(Protocol):
    """One account's configuration as its adapter is built with it (telegram_accounts.Bot,
    slack_accounts.Workspace, discord_accounts.App): compared to tell a changed account."""

    @property
    def account(self) -> str: ...


S = TypeVar("S", bound=Spec)


@dataclass(frozen=True)
class Platform(Generic[S]):
    """A built-in channel's accounts: ``specs`` reads and checks them from the settings
    (:class:`~switchboard.errors.ConfigError` when they are wrong), ``build`` makes the adapter
    of one (not started)."""

    name: str
    specs: Callable[[GatewaySettings], Sequence[S]]
    build: Callable[[GatewaySettings, S], OneAccount]

    def adapter(self, settings: GatewaySettings) -> ChannelAdapter | None:
        """The ``default`` account alone as its own adapter (as before named accounts
        existed), or every account behind one :class:`Accounts`; None without any."""
        adapters = {s.account: self.build(settings, s) for s in self.specs(settings)}
        if not adapters:
            return None
        if list(adapters) == [DEFAULT]:
            return adapters[DEFAULT]
        return Accounts(self.name, adapters)


class Accounts:
    """The channel ``name`` served by one adapter per account."""

    def __init__(self, name: str, adapters: Mapping[str, OneAccount]) -> None:
        self.name = name
        self.adapters = dict(adapters)
        self._on_publish: OnPublish | None = None
        self._media: MediaClient | None = None

    def __repr__(self) -> str:  # the accounts' names; each adapter's repr hides its secrets
        return f"Accounts({self.name!r}, {sorted(self.adapters)!r})"

    @property
    def accounts(self) -> tuple[str, ...]:  # any other account's webhook is 404 (routes.py)
        return tuple(self.adapters)

    def put(self, account: str, adapter: OneAccount) -> OneAccount | None:
        """Serve ``account`` with ``adapter`` (started) from now on; the adapter it had."""
        adapters = dict(self.adapters)
        old = adapters.get(account)
        adapters[account] = adapter
        self.adapters = adapters  # one assignment: a reader sees the old map or the new one
        return old

    def pop(self, account: str) -> OneAccount | None:
        """Stop serving ``account``; its adapter (to be closed), if it had one."""
        adapters = dict(self.adapters)
        old = adapters.pop(account, None)
        self.adapters = adapters
        return old

    # The gateway sets these on a channel's adapter (server.py, typing.py); every account's
    # adapter needs them.
    @property
    def on_publish(self) -> OnPublish | None:
        return self._on_publish

    @on_publish.setter
    def on_publish(self, value: OnPublish | None) -> None:
        self._on_publish = value
        for adapter in self.adapters.values():
            if isinstance(adapter, PublishesItself):
                adapter.on_publish = value

    @property
    def media(self) -> MediaClient | None:
        return self._media

    @media.setter
    def media(self, value: MediaClient | None) -> None:
        self._media = value
        for adapter in self.adapters.values():
            adapter.media = value

    async def start(self, rt: ServiceRuntime) -> None:
        """Start every account's adapter; if one refuses (a bad token), those started are
        closed again before the error stops the gateway."""
        started: list[OneAccount] = []
        try:
            for adapter in self.adapters.values():
                await adapter.start(rt)
                started.append(adapter)
        except BaseException:
            for adapter in reversed(started):
                await adapter.close()
            raise

    async def close(self) -> None:
        for adapter in self.adapters.values():
            await adapter.close()

    def _of(self, account: str) -> OneAccount:
        adapter = self.adapters.get(account)
        if adapter is None:  # routes.py 404s it first; never another account's secret
            raise Unauthorized(f"no {self.name} account {account[:64]!r}")
        return adapter

    async def typing(self, account: str, chat: messages_pb2.ChatRef, thread_id: str) -> None:
        adapter = self.adapters.get(account)
        if adapter is not None:
            await adapter.typing(account, chat, thread_id)

    def verify(self, request: InboundRequest) -> None:
        self._of(request.account).verify(request)

    def parse(self, request: InboundRequest) -> Inbound:
        return self._of(request.account).parse(request)

    async def fetch_attachments(self, message: messages_pb2.InboundMessage) -> None:
        """With the account's token: a platform's file ids and URLs are per bot (an adapter
        without it takes no attachments in, as routes.py treats it)."""
        adapter = self.adapters.get(message.account)
        fetch = getattr(adapter, "fetch_attachments", None)
        if fetch is not None:
            await fetch(message)

    def format(self, part: messages_pb2.OutboundMessage) -> Sequence[PlatformMessage]:
        adapter = self.adapters.get(part.account)
        if adapter is None:  # never configured, or removed since the message came in
            raise Undeliverable(f"no {self.name} account {part.account[:64]!r} (not served)")
        return adapter.format(part)

    async def send(self, account: str, message: PlatformMessage) -> None:
        adapter = self.adapters.get(account)
        if adapter is None:
            raise Undeliverable(f"no {self.name} account {account[:64]!r}")
        await adapter.send(account, message)
