"""A session's WebChat events in this gateway process: one NATS subscription per session
(``sb.events.<session token>``) shared by its sockets, numbering its events (``seq``: 1, 2, 3...
within the feed's ``epoch``) and keeping the last ones in a bounded ring so that a socket that
reconnects gets what it missed.

A feed lives while a socket follows its session and ``grace_s`` longer (events that come in
meanwhile are kept for the reconnect). A reconnect to another gateway replica, or after the feed
was dropped, finds another epoch: the client is told of a gap and reloads the history. (The
EVENTS JetStream stream also holds these events for an hour; replaying from it would survive
replicas and restarts, but the gateway's NATS user may not create consumers on it.)
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import deque
from dataclasses import dataclass, field

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from switchboard import bus
from switchboard.sessions import session_token
from switchboard.v1 import messages_pb2

from . import protocol
from .translate import translate

log = logging.getLogger(__name__)
QUEUE_LIMIT = 2000  # events waiting for one socket; past it the socket is closed as too slow
MAX_IDLE_FEEDS = 256  # feeds without sockets kept for reconnects; the oldest goes first


@dataclass(frozen=True)
class Event:
    seq: int
    frame: str  # the whole event frame, JSON


@dataclass(eq=False)  # each is its own: kept in a set
class Listener:
    """One socket's view of a feed: its queue of events to send (None: it fell behind)."""

    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)
    overflowed: bool = False

    def offer(self, event: Event) -> None:
        if self.overflowed:
            return
        if self.queue.qsize() >= QUEUE_LIMIT:
            self.overflowed = True
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(event)


@dataclass(frozen=True)
class Attached:
    """What a socket gets when it starts following a feed."""

    listener: Listener
    epoch: str
    position: int  # the feed's seq when the socket attached (after the replay)
    replay: list[Event]
    gap: protocol.Gap | None  # the client missed events that are not kept


class Feed:
    def __init__(self, key: str, capacity: int) -> None:
        self.key = key
        self.epoch = secrets.token_hex(8)
        self.seq = 0
        self.ring: deque[Event] = deque(maxlen=capacity)
        self.listeners: set[Listener] = set()
        self.sub: Subscription | None = None
        self.expiry: asyncio.TimerHandle | None = None

    def publish(self, agent_event: messages_pb2.AgentEvent) -> None:
        if agent_event.session_key != self.key:
            return
        translated = translate(agent_event)
        if translated is None:
            return
        name, payload = translated
        self.seq += 1
        event = Event(self.seq, protocol.event(name, payload, self.seq))
        self.ring.append(event)
        for listener in self.listeners:
            listener.offer(event)

    def attach(self, epoch: str | None, last_seq: int | None) -> Attached:
        """Follow the feed from now on; with the ``epoch`` and ``last_seq`` of an earlier
        socket, also get the events it missed (or a gap when they are not kept)."""
        replay: list[Event] = []
        gap = None
        if last_seq is not None:
            if epoch != self.epoch:
                gap = protocol.Gap(
                    reason="new_feed",
                    message="The events since the last connection are not kept here; "
                    "reload the history.",
                )
            elif last_seq > self.seq:
                gap = protocol.Gap(
                    reason="unknown_position", message="last_seq is ahead of this feed."
                )
            elif last_seq < self.seq:
                first_kept = self.ring[0].seq if self.ring else self.seq + 1
                if last_seq + 1 >= first_kept:
                    replay = [e for e in self.ring if e.seq > last_seq]
                else:
                    gap = protocol.Gap(
                        reason="too_far_behind",
                        message="More events were missed than are kept; reload the history.",
                    )
        listener = Listener()
        self.listeners.add(listener)
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None
        return Attached(listener, self.epoch, self.seq, replay, gap)


class FeedHub:
    """The feeds of this gateway process, by session key."""

    def __init__(self, nc: NATS, subjects: bus.Subjects, capacity: int, grace_s: float) -> None:
        self.nc = nc
        self.subjects = subjects
        self.capacity = capacity
        self.grace_s = grace_s
        self.feeds: dict[str, Feed] = {}
        self.idle: dict[str, None] = {}  # feeds without sockets, oldest first
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[None]] = set()  # unsubscriptions under way

    async def attach(self, key: str, epoch: str | None, last_seq: int | None) -> Attached:
        async with self._lock:  # one subscription per session, even for sockets at once
            feed = self.feeds.get(key)
            if feed is None:
                feed = Feed(key, self.capacity)

                async def on_event(_: Msg, e: messages_pb2.AgentEvent, f: Feed = feed) -> None:
                    f.publish(e)

                handler = bus.decoding(messages_pb2.AgentEvent, on_event, "webchat events")
                feed.sub = await self.nc.subscribe(
                    self.subjects.events(session_token(key)), cb=handler
                )
                await self.nc.flush()  # subscribed at the server before any message is sent
                self.feeds[key] = feed
            self.idle.pop(key, None)
            return feed.attach(epoch, last_seq)

    def detach(self, key: str, listener: Listener) -> None:
        feed = self.feeds.get(key)
        if feed is None:
            return
        feed.listeners.discard(listener)
        if feed.listeners:
            return
        self.idle[key] = None
        feed.expiry = asyncio.get_running_loop().call_later(self.grace_s, self._expire, key)
        while len(self.idle) > MAX_IDLE_FEEDS:
            self._expire(next(iter(self.idle)))

    def _expire(self, key: str) -> None:
        feed = self.feeds.get(key)
        if feed is None or feed.listeners:
            return
        del self.feeds[key]
        self.idle.pop(key, None)
        if feed.expiry is not None:
            feed.expiry.cancel()
        if feed.sub is not None:
            task = asyncio.get_running_loop().create_task(self._unsubscribe(feed.sub))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    @staticmethod
    async def _unsubscribe(sub: Subscription) -> None:
        try:
            await sub.unsubscribe()
        except Exception as exc:  # the connection is closing: nothing to undo
            log.debug("webchat: unsubscribe failed: %s", exc)
