"""The built-in chat channels of a running gateway, whose accounts change without a restart
(issue 27, part 5; docs/config-file.md): a changed configuration file hands the gateway new
settings (``rt.on_reload``) and :meth:`LiveChannels.reload` compares each channel's accounts
(``SB_TELEGRAM_ACCOUNTS`` and the single-account settings of ``default``...) with those running:

- an account no longer configured leaves the channel (its webhook is 404 from then on, a reply
  part for it is dead-lettered as Undeliverable) and is closed: its polling or Discord gateway
  connection stopped, its lease released;
- a new account is started (``getMe``, ``auth.test``, ``setWebhook``, its polling or gateway
  connection) and then served; one the platform refuses is logged and left out, whole;
- a changed account is replaced: the new adapter is started, then served, then the old one
  closed; when the old one holds a connection under a lease (Telegram polling, Discord's
  gateway), it is closed first, so the two never poll or connect side by side. A replacement
  the platform refuses leaves the account as it ran (started again from its running
  configuration when it had been closed first);
- an unchanged account keeps its adapter, untouched.

Each channel is one :class:`~.accounts.Accounts` for the whole life of the gateway (the webhook
route, delivery and typing hold it), also when it serves a single account or none. Settings
a channel refuses (a token that is not one, a bot under two names) change nothing of that
channel, and are logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from switchboard.errors import ConfigError
from switchboard.media import MediaClient
from switchboard.runtime import ServiceRuntime

from ..config import GatewaySettings
from . import platforms
from .accounts import Accounts, OneAccount, Platform, Spec
from .typing import Typing

log = logging.getLogger(__name__)

# A channel first served by a reload: its replies need a delivery consumer, its webhooks a route.
NewChannel = Callable[[str, Accounts], Awaitable[None]]


class LiveChannels:
    def __init__(self, rt: ServiceRuntime, typing: Typing, media: MediaClient | None) -> None:
        self.rt = rt
        self.typing = typing
        self.media = media
        self.on_new: NewChannel | None = None
        # By name, as the gateway serves them (the webhook route, delivery): shared.
        self.channels: dict[str, Accounts] = {}
        self._specs: dict[str, dict[str, Spec]] = {}  # what each running account was built with
        self._lock = asyncio.Lock()

    async def start(self, settings: GatewaySettings) -> None:
        """Start every configured account. One the platform refuses stops the gateway, as it
        always did (:meth:`close` closes those started)."""
        for platform in platforms(settings):
            for spec in platform.specs(settings):
                adapter = await self._started(platform, settings, spec, quiet=False)
                assert adapter is not None  # quiet=False raises instead
                self._channel(platform.name).put(spec.account, adapter)
                self._specs[platform.name][spec.account] = spec

    async def reload(self, settings: GatewaySettings) -> None:
        """Apply the accounts of ``settings`` (the gateway's ``rt.on_reload`` hook)."""
        async with self._lock:
            for platform in platforms(settings, also=self.channels):
                await self._reload(platform, settings)

    async def close(self) -> None:
        for name, channel in self.channels.items():
            for account in channel.accounts:
                adapter = channel.pop(account)
                self._specs[name].pop(account, None)
                if adapter is not None:
                    await adapter.close()

    # --- one channel -----------------------------------------------------------------------

    def _channel(self, name: str) -> Accounts:
        channel = self.channels.get(name)
        if channel is None:
            channel = self.channels[name] = Accounts(name, {})
            self._specs[name] = {}
        return channel

    async def _reload(self, platform: Platform[Any], settings: GatewaySettings) -> None:
        name = platform.name
        try:
            wanted: dict[str, Spec] = {s.account: s for s in platform.specs(settings)}
        except ConfigError as exc:  # says which setting, never a secret
            log.error("%s accounts not changed: %s", name, exc)
            return
        if wanted == self._specs.get(name, {}):
            return
        new = name not in self.channels
        channel = self._channel(name)
        running = self._specs[name]
        if new and self.on_new is not None:
            await self.on_new(name, channel)
        # Removed first: an account renamed with the same bot is not polled twice meanwhile.
        for account in sorted(running.keys() - wanted.keys()):
            old = channel.pop(account)
            del running[account]
            if old is not None:
                await old.close()
            log.info("%s account %r removed", name, account)
        for account, spec in wanted.items():
            if account not in running:
                adapter = await self._started(platform, settings, spec)
                if adapter is not None:
                    channel.put(account, adapter)
                    running[account] = spec
                    log.info("%s account %r added", name, account)
            elif running[account] != spec:
                await self._replace(platform, settings, channel, spec)

    async def _replace(
        self, platform: Platform[Any], settings: GatewaySettings, channel: Accounts, spec: Spec
    ) -> None:
        name, account = platform.name, spec.account
        running = self._specs[name]
        old = channel.adapters.get(account)
        first = old is not None and old.leased
        if old is not None and first:  # its lease must be free for the new one
            await old.close()  # still served meanwhile: webhooks verify without it running
        adapter = await self._started(platform, settings, spec)
        if adapter is None:
            log.error("%s account %r keeps its running configuration", name, account)
            if first:
                await self._restore(platform, settings, channel, running[account])
            return
        channel.put(account, adapter)
        running[account] = spec
        if old is not None and not first:
            await old.close()
        log.info("%s account %r changed", name, account)

    async def _restore(
        self, platform: Platform[Any], settings: GatewaySettings, channel: Accounts, spec: Spec
    ) -> None:
        again = await self._started(platform, settings, spec)
        if again is not None:
            channel.put(spec.account, again)
            return
        channel.pop(spec.account)
        del self._specs[platform.name][spec.account]
        log.error(
            "%s account %r stopped: it could not be started again", platform.name, spec.account
        )

    async def _started(
        self, platform: Platform[Any], settings: GatewaySettings, spec: Spec, *, quiet: bool = True
    ) -> OneAccount | None:
        """The account's adapter, started; with ``quiet`` None (logged) when it could not
        be, with nothing of it left running."""
        adapter = platform.build(settings, spec)
        adapter.media = self.media
        self.typing.follow(adapter)  # before start: polling publishes from then on
        try:
            await adapter.start(self.rt)
        except Exception as exc:
            await adapter.close()
            if not quiet:
                raise
            if isinstance(exc, ConfigError):  # the platform refused the token or URL
                log.error("%s account %r not started: %s", platform.name, spec.account, exc)
            else:
                log.exception("%s account %r not started", platform.name, spec.account)
            return None
        return adapter
