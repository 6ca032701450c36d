"""How a session's pending lane items become runs (the queue modes are
:class:`switchboard.queue_modes.QueueMode`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from switchboard.queue_modes import QueueMode
from switchboard.v1 import messages_pb2


@dataclass(frozen=True)
class PendingItem:
    seq: int
    item: messages_pb2.LaneItem
    headers: dict[str, str]
    arrived_at: float = 0.0  # when the stream stored it (unix seconds)


@dataclass
class Batch:
    """The lane items one run answers, in lane order; the last one is the run's own message.
    Earlier ones (collect, steer, interrupt) are recorded with it as one user turn."""

    items: list[PendingItem]

    @property
    def primary(self) -> PendingItem:
        return self.items[-1]

    @property
    def cover_seq(self) -> int:
        return self.items[-1].seq


def plan(mode: QueueMode, pending: list[PendingItem]) -> list[Batch]:
    """``queue``/``followup``: one run per item. ``collect``, ``steer`` and ``interrupt``: one run
    for everything pending (the newest item leads; older ones ride along as context)."""
    if not pending:
        return []
    if mode.one_run_for_all_pending:
        return [Batch(list(pending))]
    return [Batch([p]) for p in pending]


def effective_mode(session_mode: str, item_mode: str, agent_default: QueueMode) -> QueueMode:
    """The session's override, else the channel's (carried by the lane item), else the
    agent's."""
    return QueueMode.effective(session_mode, item_mode, default=agent_default)


class PendingSource(Protocol):
    async def pending(self, subject: str, after: int, limit: int = ...) -> list[PendingItem]: ...


class RunControl:
    """What the lane owner can do to a run in progress: feed it newer messages (steer) or
    abort it (interrupt)."""

    def __init__(self, source: PendingSource, subject: str, batch: Batch, *, steer: bool):
        self.source = source
        self.subject = subject
        self.batch = batch
        self.steer = steer
        self.interrupted = False

    async def take_new(self) -> list[PendingItem]:
        """steer: the items that arrived since the run started; they join its batch."""
        if not self.steer:
            return []
        new = await self.source.pending(self.subject, self.batch.cover_seq)
        self.batch.items.extend(new)
        return new
