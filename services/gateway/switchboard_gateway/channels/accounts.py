"""One channel, several accounts (issue 27): :class:`Accounts` is the channel's adapter when it
has more than one bot or workspace, each its own adapter of one account. A webhook call, a
reply part, a typing indicator or an attachment download goes to the adapter of its account,
so a reply leaves through the bot the message came in on, with that bot's token."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from switchboard.media import MediaClient
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2

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

    @property
    def accounts(self) -> Collection[str]: ...


class Accounts:
    """The channel ``name`` served by one adapter per account."""

    def __init__(self, name: str, adapters: Mapping[str, OneAccount]) -> None:
        self.name = name
        self.adapters = dict(adapters)
        self.accounts = tuple(self.adapters)  # any other account's webhook is 404 (routes.py)
        self._on_publish: OnPublish | None = None
        self._media: MediaClient | None = None

    def __repr__(self) -> str:  # the accounts' names; each adapter's repr hides its secrets
        return f"Accounts({self.name!r}, {sorted(self.adapters)!r})"

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
        # The account's own adapter when there is one; ``send`` refuses an unknown account.
        adapter = self.adapters.get(part.account) or next(iter(self.adapters.values()))
        return adapter.format(part)

    async def send(self, account: str, message: PlatformMessage) -> None:
        adapter = self.adapters.get(account)
        if adapter is None:
            raise Undeliverable(f"no {self.name} account {account[:64]!r}")
        await adapter.send(account, message)
