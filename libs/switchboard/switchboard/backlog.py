"""Work waiting in a durable consumer, exported as a gauge: the signal to autoscale on (KEDA's
NATS JetStream scaler reads the same numbers from the server)."""

from __future__ import annotations

import asyncio
import logging

from nats.js import JetStreamContext
from prometheus_client import Gauge

log = logging.getLogger(__name__)

BACKLOG = Gauge(
    "sb_consumer_backlog",
    "Messages not yet delivered (pending) and delivered but unacknowledged (ack_pending)",
    ["stream", "consumer", "kind"],
)


async def refresh(js: JetStreamContext, stream: str, consumer: str) -> tuple[int, int]:
    info = await js.consumer_info(stream, consumer)
    pending, ack_pending = int(info.num_pending or 0), int(info.num_ack_pending or 0)
    BACKLOG.labels(stream, consumer, "pending").set(pending)
    BACKLOG.labels(stream, consumer, "ack_pending").set(ack_pending)
    return pending, ack_pending


async def track(js: JetStreamContext, stream: str, consumer: str, interval_s: float = 5.0) -> None:
    """Refresh the gauge every ``interval_s`` until cancelled; a failed read (NATS restarting)
    is logged and retried at the next tick."""
    while True:
        try:
            await refresh(js, stream, consumer)
        except Exception as exc:  # transient: the next tick retries
            log.warning("could not read the backlog of %s/%s: %s", stream, consumer, exc)
        await asyncio.sleep(interval_s)
