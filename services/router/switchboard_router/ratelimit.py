"""Per-sender rate limits (docs/settings.md): a token bucket per (channel, sender), refilled
at ``per_minute`` and holding at most ``burst``. A message over the limit is refused (reason
``rate_limited``), counted and never run.

The buckets live in this router replica's memory: with N replicas sharing the INBOUND consumer
a sender may get up to N times the rate (the messages spread over the replicas). At most
``max_senders`` buckets are kept; the least recently seen go first."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable


class RateLimiter:
    def __init__(
        self,
        per_minute: float,
        burst: int,
        max_senders: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate_s = per_minute / 60.0
        self.burst = float(burst)
        self.max_senders = max_senders
        self.clock = clock
        self._buckets: OrderedDict[tuple[str, str], tuple[float, float]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.rate_s > 0

    def allow(self, channel: str, sender: str) -> bool:
        """Take one token from the sender's bucket; False when it is empty."""
        if not self.enabled:
            return True
        key = (channel, sender)
        now = self.clock()
        tokens, last = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate_s)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > self.max_senders:
            self._buckets.popitem(last=False)
        return allowed
