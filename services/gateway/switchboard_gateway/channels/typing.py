"""Showing "typing..." in a chat while the agent answers a message this replica received.

A webhook's messages (and those an adapter publishes itself: ``follow``) are remembered
(``expect``) with their chat for ``remember_s``, just before they are published: under load the
agent's ``lifecycle start`` event can arrive before the publish's ack. When such an event names
one of them (``message_ids``), the chat's adapter is asked to show typing, again every
``interval_s`` (platforms drop the indicator after ~5 s), until the run's ``lifecycle end`` or
``max_s``. A message the router refused never starts a run, so its sender sees nothing.
Best effort: a failed typing call is logged and ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from switchboard import bus
from switchboard.v1 import messages_pb2

from .base import ChannelAdapter, PublishesItself

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Chat:
    adapter: ChannelAdapter
    account: str
    chat: messages_pb2.ChatRef
    thread_id: str
    expires: float


class Typing:
    def __init__(
        self,
        nc: NATS,
        subjects: bus.Subjects,
        *,
        interval_s: float = 4.0,
        max_s: float = 120.0,
        remember_s: float = 300.0,
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.interval_s = interval_s
        self.max_s = max_s
        self.remember_s = remember_s
        self._expected: dict[str, _Chat] = {}
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._sub: Subscription | None = None
        self._started = False

    async def start(self) -> None:
        """Follow the agents' events; again (a channel added while running, live.py) does
        nothing."""
        if self._started:
            return
        self._started = True
        self._sub = await self.nc.subscribe(
            f"{self.subjects.prefix}.events.>",
            cb=bus.decoding(messages_pb2.AgentEvent, self._on_event, "typing"),
        )

    async def close(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        for task in self._runs.values():
            task.cancel()
        self._runs.clear()

    def follow(self, adapter: ChannelAdapter) -> None:
        """Hear of the messages ``adapter`` publishes itself (polling, a gateway connection);
        call before the adapter starts. The webhook route calls ``expect`` for the others."""
        if isinstance(adapter, PublishesItself):
            adapter.on_publish = lambda message: self.expect(adapter, message)

    def expect(self, adapter: ChannelAdapter, message: messages_pb2.InboundMessage) -> None:
        now = time.monotonic()
        if len(self._expected) > 10_000:  # bounded: forget the expired ones first
            self._expected = {k: v for k, v in self._expected.items() if v.expires > now}
        self._expected[message.message_id] = _Chat(
            adapter, message.account, message.chat, message.thread_id, now + self.remember_s
        )

    async def _on_event(self, _: Msg, event: messages_pb2.AgentEvent) -> None:
        if event.stream != "lifecycle":
            return
        if event.phase == "end":
            task = self._runs.pop(event.run_id, None)
            if task is not None:
                task.cancel()
            return
        if event.phase != "start" or event.run_id in self._runs:
            return
        ids = list(event.message_ids) or [event.message_id]
        chat = next((self._expected.pop(i) for i in ids if i in self._expected), None)
        if chat is None or chat.expires < time.monotonic():
            return
        self._runs[event.run_id] = asyncio.create_task(self._show(event.run_id, chat))

    async def _show(self, run_id: str, chat: _Chat) -> None:
        deadline = time.monotonic() + self.max_s
        try:
            while time.monotonic() < deadline:
                try:
                    await chat.adapter.typing(chat.account, chat.chat, chat.thread_id)
                except Exception:
                    log.warning("typing indicator failed", extra={"channel": chat.adapter.name})
                    return
                await asyncio.sleep(self.interval_s)
        finally:
            self._runs.pop(run_id, None)
