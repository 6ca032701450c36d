"""Telegram polling in-process (channels/lease.py, channels/telegram_poll.py) against a real
nats-server and the fake Bot API of tests/fakes/telegram_updates.py over HTTP: shared by
test_telegram_poll.py and test_telegram_poll_errors.py.

A "replica" is a gateway ServiceRuntime connected as the gateway's own NATS user (so the lease
bucket's permissions are the real ones) running ``start_polling``. The lease bucket is made
with a 5 s TTL (``ensure_streams_short_leases``; production's is 15 s) and the gateway reads its
TTL from the bucket: a crashed holder's lease expires only after it, so takeover tests wait
that long (bounded generously, no durations asserted).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NATS
from prometheus_client import REGISTRY

from switchboard import registry
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.lease import lease_key
from switchboard_gateway.channels.telegram_api import BotApi
from switchboard_gateway.channels.telegram_inbound import BotInfo, parse_update
from switchboard_gateway.channels.telegram_poll import Polling, start_polling
from switchboard_gateway.config import GatewaySettings
from tests.fakes.telegram_updates import FakeTelegramUpdates
from tests.support.servers import service_nats_env
from tests.support.streams import stored as stream_messages

TAKEOVER_S = 60.0  # a crashed holder's lease expires after the bucket's 5 s TTL; generous
KEY = lease_key("telegram", "default")


def parse(update: Mapping[str, Any]) -> Sequence[messages_pb2.InboundMessage]:
    return parse_update(update, BotInfo(123456, "fake_bot"))


@dataclass
class Replica:
    name: str
    rt: ServiceRuntime
    polling: Polling

    @property
    def held(self) -> bool:
        return self.polling.work.held

    @property
    def polls(self) -> int:
        return self.polling.poller.polls

    async def crash(self) -> None:
        """Stop without releasing the lease: it expires after the bucket's TTL."""
        await self.polling.work.stop(release=False)


def gateway_settings(nats_url: str, **values: Any) -> GatewaySettings:
    """Settings of a gateway connected as the gateway's own NATS user."""
    return GatewaySettings.from_environ(service_nats_env(nats_url, "gateway"), **values)


@asynccontextmanager
async def replica(
    nats_url: str, home: Path, fake: FakeTelegramUpdates, name: str, **overrides: Any
) -> AsyncIterator[Replica]:
    values: dict[str, Any] = {
        "home": home,
        "instance": name,
        "log_json": False,
        "telegram_bot_token": fake.token,
        "telegram_api_base": fake.base_url,
        "telegram_mode": "polling",
        **overrides,
    }
    settings = gateway_settings(nats_url, **values)
    api = BotApi(fake.base_url, fake.token)
    api.open()
    async with ServiceRuntime(registry.get("gateway"), settings, asyncio.Event()) as rt:
        polling = await start_polling(rt, settings, api, parse, retry_s=0.3)
        try:
            yield Replica(name, rt, polling)
        finally:
            await polling.close()
            await api.close()


async def wait_for(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
    return value


async def inbound(nc: NATS) -> list[tuple[str, messages_pb2.InboundMessage]]:
    """What the INBOUND stream holds: (Nats-Msg-Id, message) in order."""
    found = await stream_messages(nc.jetstream(), "INBOUND", messages_pb2.InboundMessage)
    return [(s.msg_id, s.message) for s in found]


async def wait_inbound(
    nc: NATS, n: int, timeout: float = 20.0
) -> list[tuple[str, messages_pb2.InboundMessage]]:
    deadline = time.monotonic() + timeout
    while len(got := await inbound(nc)) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"INBOUND holds {len(got)} messages, expected {n}")
        await asyncio.sleep(0.05)
    return got


def metric(name: str, **labels: str) -> float:
    return (
        REGISTRY.get_sample_value(name, {"channel": "telegram", "account": "default", **labels})
        or 0.0
    )
