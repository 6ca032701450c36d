"""Debounce (docs/settings.md): rapid-fire messages of one sender in one chat become one
lane item, so the agent answers the thought once instead of each fragment.

The first message of a sender's burst leads: its handler waits until no further message came
for ``window_s`` (at most ``max_s`` from the first), then routes the merged message. The later
messages' handlers join the leader's batch and wait for it; they are acknowledged only once the
merged item is on the lane (if routing it fails they are redelivered). Batches live in one
router replica: messages of a burst that another replica receives are routed on their own.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from switchboard.v1 import messages_pb2


class BatchFailed(Exception):
    """The leader of the batch this message joined could not route it."""


@dataclass
class Batch:
    messages: list[messages_pb2.InboundMessage]
    first_at: float
    last_at: float
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Future[bool] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def finish(self, routed: bool) -> None:
        if not self.done.done():
            self.done.set_result(routed)


def merge(messages: list[messages_pb2.InboundMessage]) -> messages_pb2.InboundMessage:
    """One message from a burst: the texts joined by newlines, every attachment; the first
    message's ids (its dedupe key and what a reply answers)."""
    merged = messages_pb2.InboundMessage()
    merged.CopyFrom(messages[0])
    if len(messages) > 1:
        merged.text = "\n".join(m.text for m in messages if m.text)
        del merged.media[:]
        for m in messages:
            merged.media.extend(m.media)
        merged.mentions_bot = any(m.mentions_bot for m in messages)
    return merged


class Debouncer:
    def __init__(self, window_s: float, max_s: float) -> None:
        self.window_s = window_s
        self.max_s = max(max_s, window_s)
        self._open: dict[tuple[str, str, str, str], Batch] = {}

    async def gather(self, msg: messages_pb2.InboundMessage) -> Batch | None:
        """The batch to route when ``msg`` leads one (the caller routes it and calls
        ``finish``); ``None`` when ``msg`` joined another's batch that has been routed."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        key = (msg.channel, msg.account, msg.chat.id, msg.sender)
        joined = self._open.get(key)
        if joined is not None:
            joined.messages.append(msg)
            joined.last_at = now
            joined.wake.set()
            if not await asyncio.shield(joined.done):
                raise BatchFailed("the merged message was not routed")
            return None
        batch = Batch([msg], now, now)
        self._open[key] = batch
        try:
            while True:
                deadline = min(batch.last_at + self.window_s, batch.first_at + self.max_s)
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                batch.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(batch.wake.wait(), remaining)
        except BaseException:
            batch.finish(False)
            raise
        finally:
            del self._open[key]
        return batch
