"""Telegram's polling mode (``SB_TELEGRAM_MODE=polling``): for hosts Telegram cannot reach, the
gateway fetches updates with ``getUpdates`` instead of receiving webhooks.

One gateway replica polls each bot: the one holding the lease ``telegram.<account>`` in the
channel lease bucket (:mod:`.lease`); the others retry to take it every few seconds. While it
holds the lease the poller:

1. calls ``deleteWebhook`` once (Telegram answers getUpdates with 409 while a webhook is set);
2. loops ``getUpdates(offset, timeout=<long poll>, allowed_updates)``; each update is parsed
   and its messages published to ``INBOUND`` under the webhook route's ``Nats-Msg-Id``
   (``telegram:<account>:<message_id>``), and only once they are acknowledged does the offset
   move past it (the next getUpdates confirms it to Telegram);
3. stores the offset under ``telegram.<account>.offset`` next to the lease, rewritten with each
   renewal (the bucket's keys expire after its TTL), so a replica taking over starts where this
   one stopped. The value names the bot too (``<offset>:<bot id>``): an offset another bot left
   there (the account's token changed to another bot's) is not used, since update ids are per
   bot and a higher offset would confirm, and so drop, the new bot's pending updates. Should it
   be gone (no replica for longer than the TTL), Telegram still holds every unconfirmed update,
   and one published but not yet confirmed is dropped as a duplicate by the stream's dedupe
   window.

A watchdog cancels a getUpdates that has not answered within the long-poll timeout plus a margin
and starts it again; errors back off (a 429's ``retry_after`` is honoured). Each restart counts
in ``sb_channel_poll_restarts_total{reason}``; ``sb_channel_poll_healthy`` is 1 while this
replica polls and its last getUpdates succeeded. Losing the lease cancels polling at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2

from ..config import GatewaySettings
from ..conversations import Conversations
from ..metrics import POLL_HEALTHY, POLL_RESTARTS
from .base import ChannelError, OnPublish
from .lease import ChannelLease, LeasedWork, bucket_ttl, lease_key
from .telegram_api import BotApiError
from .telegram_inbound import ALLOWED_UPDATES

log = logging.getLogger(__name__)

CHANNEL = "telegram"

Parse = Callable[[Mapping[str, Any]], Sequence[messages_pb2.InboundMessage]]
Publish = Callable[[messages_pb2.InboundMessage], Awaitable[object]]


class UpdatesApi(Protocol):
    """The Bot API as polling needs it: the adapter's ``call`` (:mod:`.telegram_api`), which
    raises :class:`BotApiError` for Telegram's errors and ``httpx.HTTPError`` when it cannot
    reach Telegram."""

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> Any: ...


@dataclass(frozen=True)
class PollSettings:
    timeout_s: int = 30  # getUpdates' long poll
    watchdog_margin_s: float = 15.0  # a poll not answered by timeout + margin is restarted
    limit: int = 100  # updates per getUpdates (Telegram's maximum)
    allowed_updates: tuple[str, ...] = ALLOWED_UPDATES
    min_backoff_s: float = 1.0
    max_backoff_s: float = 60.0


class TelegramPoller:
    """The work done under the lease (:meth:`run`); :attr:`polls` counts the getUpdates calls
    this poller had answered."""

    def __init__(
        self,
        api: UpdatesApi,
        parse: Parse,
        publish: Publish,
        *,
        account: str,
        settings: PollSettings,
        on_publish: OnPublish | None = None,
        bot_id: int = 0,
    ) -> None:
        self.api = api
        self.parse = parse
        self.publish = publish
        self.account = account
        self.bot_id = bot_id  # the token's; 0: unknown (any stored offset is taken)
        self.settings = settings
        self.on_publish = on_publish
        self.polls = 0
        self._healthy = POLL_HEALTHY.labels(CHANNEL, account)

    def _restart(self, reason: str) -> None:
        POLL_RESTARTS.labels(CHANNEL, self.account, reason).inc()
        self._healthy.set(0)

    async def run(self, lease: ChannelLease) -> None:
        offset_key = f"{lease.key}.offset"
        offset = self._stored_offset(await lease.get_state(offset_key))
        log.info("telegram polling starts", extra={"account": self.account, "offset": offset})
        try:
            await self._delete_webhook()
            await self._poll(lease, offset_key, offset)
        finally:
            self._healthy.set(0)

    def _stored_offset(self, stored: bytes | None) -> int:
        text, _, bot = (stored or b"").decode("ascii", "replace").partition(":")
        if not text.isdigit():
            return 0
        if bot and self.bot_id and bot != str(self.bot_id):
            log.info("telegram poll offset of another bot ignored", extra={"account": self.account})
            return 0
        return int(text)

    async def _delete_webhook(self) -> None:
        backoff = self.settings.min_backoff_s
        while True:
            try:
                await self.api.call("deleteWebhook", {}, timeout_s=30.0)
                return
            except Exception as exc:
                backoff = await self._back_off(exc, backoff, "deleteWebhook")

    async def _poll(self, lease: ChannelLease, offset_key: str, offset: int) -> None:
        s = self.settings
        params: dict[str, Any] = {
            "timeout": s.timeout_s,
            "limit": s.limit,
            "allowed_updates": list(s.allowed_updates),
        }
        backoff = s.min_backoff_s
        while True:
            if offset:
                params["offset"] = offset
            # The watchdog: the call is cancelled (and its connection closed) when it does not
            # answer within the long poll plus the margin. (asyncio.timeout, not wait_for:
            # on 3.11 wait_for can swallow the cancel that losing the lease sends.)
            watchdog_s = s.timeout_s + s.watchdog_margin_s
            try:
                async with asyncio.timeout(watchdog_s):
                    result = await self.api.call("getUpdates", params, timeout_s=watchdog_s + 5)
            except TimeoutError:
                log.warning("getUpdates hung: restarted", extra={"account": self.account})
                self._restart("hung")
                continue
            except Exception as exc:
                if (
                    isinstance(exc, BotApiError)
                    and exc.code == 409
                    and "webhook" in exc.description
                ):
                    self._restart("webhook_active")  # set again since we deleted it
                    await self._delete_webhook()
                    continue
                backoff = await self._back_off(exc, backoff, "getUpdates")
                continue
            self.polls += 1
            self._healthy.set(1)
            backoff = s.min_backoff_s
            updates = result if isinstance(result, list) else []
            fetched = _next_offset(updates, offset)
            published = await self._publish_all(updates, offset)
            if published != offset:
                offset = published
                try:
                    value = f"{offset}:{self.bot_id}" if self.bot_id else str(offset)
                    await lease.put_state(offset_key, value.encode())
                except Exception as exc:  # rewritten with the next renewal
                    log.warning("poll offset not stored (%s)", type(exc).__name__)
            if published < fetched:  # the bus refused one: fetch it again after a pause
                self._restart("publish_failed")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, s.max_backoff_s)

    async def _publish_all(self, updates: Sequence[Any], offset: int) -> int:
        """Publish each update's messages in order; the offset past the last one published."""
        for update in updates:
            update_id = update.get("update_id") if isinstance(update, dict) else None
            if not isinstance(update_id, int) or update_id < offset:
                continue  # not an update, or one confirmed already
            try:
                messages = self.parse(update)
            except ChannelError as exc:  # skipped: it would block every later update
                log.warning(
                    "telegram update skipped: %s",
                    exc.message,
                    extra={"account": self.account, "update_id": update_id},
                )
                messages = ()
            received = int(time.time() * 1000)
            try:
                for message in messages:
                    message.channel, message.account = CHANNEL, self.account
                    message.received_at_ms = message.received_at_ms or received
                    if self.on_publish is not None:
                        self.on_publish(message)
                    await self.publish(message)
            except Exception as exc:
                log.warning("telegram update not published (%s)", type(exc).__name__)
                return offset
            offset = update_id + 1
        return offset

    async def _back_off(self, exc: Exception, backoff: float, method: str) -> float:
        """Sleep after a failed call; the next backoff."""
        reason, delay = "error", backoff
        if isinstance(exc, BotApiError):
            if exc.code == 429:
                reason, delay = "rate_limited", exc.retry_after or backoff
            elif exc.code == 409:
                reason = "conflict"  # another getUpdates (a poller outside the lease)
            elif exc.code in (401, 404):
                reason, delay = "unauthorized", self.settings.max_backoff_s
            log.warning(
                "telegram %s failed: %s %s",
                method,
                exc.code,
                exc.description,
                extra={"account": self.account},
            )
        else:
            reason = "network" if isinstance(exc, httpx.HTTPError | OSError) else "error"
            log.warning("telegram %s failed (%s)", method, type(exc).__name__)
        self._restart(reason)
        await asyncio.sleep(delay)
        return min(max(backoff * 2, self.settings.min_backoff_s), self.settings.max_backoff_s)


def _next_offset(updates: Sequence[Any], offset: int) -> int:
    ids = [
        u["update_id"]
        for u in updates
        if isinstance(u, dict) and isinstance(u.get("update_id"), int)
    ]
    return max([offset, *(i + 1 for i in ids)])


@dataclass
class Polling:
    """Polling running in a gateway: :meth:`close` stops it and releases the lease."""

    work: LeasedWork
    poller: TelegramPoller

    async def close(self) -> None:
        await self.work.stop()


async def start_polling(
    rt: ServiceRuntime,
    settings: GatewaySettings,
    api: UpdatesApi,
    parse: Parse,
    *,
    account: str = "default",
    bot_id: int = 0,
    retry_s: float = 3.0,
    on_publish: OnPublish | None = None,
    prepare: Callable[[messages_pb2.InboundMessage], Awaitable[None]] | None = None,
) -> Polling:
    """Poll the bot through ``api`` on this replica whenever it holds the account's lease;
    ``parse`` turns one update into its messages (the webhook's parser). Close the returned
    :class:`Polling` before ``api``."""
    conversations = Conversations(rt.nc, rt.js, rt.subjects)

    async def publish(message: messages_pb2.InboundMessage) -> bool:
        if prepare is not None:  # attachments into the media service first
            await prepare(message)
        return await conversations.publish(message)

    poller = TelegramPoller(
        api,
        parse,
        publish,
        account=account,
        settings=PollSettings(
            timeout_s=settings.telegram_poll_timeout_s,
            watchdog_margin_s=settings.telegram_poll_watchdog_margin_s,
        ),
        on_publish=on_publish,
        bot_id=bot_id,
    )
    kv = await rt.js.key_value(rt.subjects.channel_lease_bucket)
    work = LeasedWork(
        kv,
        lease_key(CHANNEL, account),
        f"{rt.instance}:{uuid.uuid4().hex[:8]}",  # names this replica in the lease's value
        poller.run,
        channel=CHANNEL,
        account=account,
        ttl_s=await bucket_ttl(kv),
        retry_s=retry_s,
    )
    work.start()
    return Polling(work, poller)
