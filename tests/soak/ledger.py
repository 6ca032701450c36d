"""What the traffic sent, and what each send's outcome was: the checker's side of the truth.

``accepted``: the entry point took the message (a 2xx, a WebChat ``ok``), so it must be
answered exactly once; ``unknown``: no answer came (a dropped connection, a 5xx after which
the client gave up): it may have been taken, so it may be answered at most once; ``refused``:
a clear refusal (4xx) that takes nothing."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from tests.soak.model import marker


@dataclass
class Sent:
    marker: str
    channel: str  # openai, api, telegram, slack, discord, webchat
    conversation: str  # one per session the traffic talks in
    kind: str  # plain, tool, remember
    at: float = field(default_factory=time.time)
    status: str = "pending"  # accepted, unknown, refused
    attempts: int = 0
    platform_retries: int = 0  # the same update sent again after it was taken
    detail: str = ""
    reply: str = ""  # the OpenAI API's answer


@dataclass
class Ledger:
    sent: dict[str, Sent] = field(default_factory=dict)
    order: dict[str, list[str]] = field(default_factory=dict)  # conversation -> markers sent
    memory_docs: dict[str, str] = field(default_factory=dict)  # marker -> status of its ingest
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def new(self, channel: str, conversation: str, kind: str) -> Sent:
        with self._lock:
            item = Sent(marker(next(self._ids)), channel, conversation, kind)
            self.sent[item.marker] = item
            self.order.setdefault(conversation, []).append(item.marker)
        return item

    def next_marker(self) -> str:
        with self._lock:
            return marker(next(self._ids))

    def of(self, status: str) -> list[Sent]:
        return [s for s in self.sent.values() if s.status == status]
