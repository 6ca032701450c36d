"""Sub-agents (docs/subagents.md): a run hands tasks to child sessions that run on their own
lanes, like any session, on any replica.

The way in is the lane itself: the agent appends the child's first item to
``sb.lane.<agent>.<child token>`` (a durable JetStream publish, ``Nats-Msg-Id`` derived from
the parent run and call, so a resumed run publishes nothing twice). No router hop: a child is
no inbound message from outside (no allowlist, pairing, debounce or route to resolve), and the
agent may publish on lanes (``natsauth.py``). The child's channel is ``subagent`` (its reply
goes nowhere but its transcript and events), its key ``<parent>:sub:<id>``: the tool policy
gives it the sub-agent layer (no spawning, cron, memory writes or messages by default) and the
prompt only ``AGENTS.md``/``TOOLS.md``.

Results come from the transcript store, not from a live connection: a ``wait`` polls the
child's committed run (:func:`..runs.replies.committed_reply`), so a child whose replica died is
resumed by another one and still found. A ``background`` child (or a waited-for one still
running when the wait timed out) is announced into the parent session when its run commits:
the replica that commits it appends an item to the parent's lane, a copy of the parent run's
own item (so the parent's reply goes to the same chat) with the result as its text, under
``Nats-Msg-Id = subagent:<child key>:announce``; a replay of the child's item after a crash
announces again and the duplicate is dropped (by the stream, else by the parent's run, which
never answers one inbound id twice).

Standing (docs/trust.md): every item the agent appends carries one (``LaneItem.standing``), so
a run never gets more than the run that caused it. A child's task has role ``subagent`` and the
parent run's standing; an announcement keeps its origin item's role and carries the child's
standing; ``sessions_send`` stamps the lesser of the sender's and the target's."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import asyncpg
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.sessions import SUBAGENT_MARKER, session_token, subagent_key
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2

from ..metrics import SUBAGENTS
from ..runs.replies import CommittedReply, committed_reply
from ..sessions.standing import SUBAGENT_ROLE, run_standing
from .config import SubagentSettings
from .store import BACKGROUND, WAIT, Child, SubagentStore

log = logging.getLogger(__name__)

CHILD_CHANNEL = "subagent"  # a child's task
SESSION_CHANNEL = "session"  # a message sessions_send put into another session
MAX_RESULT_CHARS = 8000  # of one child's reply, in the parent's tool result or announcement
POLL_S = (0.05, 1.0)  # first and longest pause between looks at the child's transcript
CHILD_PROMPT = (
    "You are a sub-agent: a session started by another session ({parent}) to do one task."
    " Your final answer is handed back to it (the user does not see it directly), so make it"
    " complete and self-contained; do the task, do not ask questions back."
)


def depth(session_key: str) -> int:
    """How deep a session nests: 0 for a conversation, 1 for its children..."""
    return session_key.count(SUBAGENT_MARKER)


def child_id(run_id: str, call_id: str, index: int) -> str:
    """The same for the same call of the same run (a run resumed from its checkpoint)."""
    return hashlib.sha256(f"{run_id}:{call_id}:{index}".encode()).hexdigest()[:12]


def clipped(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more]"


@dataclass(frozen=True)
class Outcome:
    """How one child of a ``wait`` came out: ``status`` is its run's (completed, error...),
    ``timeout`` (announced later) or ``not_started`` (the wait ended before its turn)."""

    child: Child
    status: str
    text: str = ""


@contextlib.asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


class Subagents:
    def __init__(
        self,
        js: JetStreamContext,
        subjects: bus.Subjects,
        pool: asyncpg.Pool,
        settings: SubagentSettings,
    ) -> None:
        self.js = js
        self.subjects = subjects
        self.pool = pool
        self.store = SubagentStore(pool)
        self.settings = settings
        # Lends the run's slot while it waits (the agent's PullWorker), as an approval does.
        self.lend: Callable[[], AbstractAsyncContextManager[None]] = _nothing

    def children_for(
        self, parent_key: str, run_id: str, call_id: str, tasks: list[tuple[str, str]], mode: str
    ) -> list[Child]:
        """Children for ``tasks`` (task, label); raises InvalidSessionKey (a ValueError)
        when the keys grow too long."""
        out = []
        for n, (task, label) in enumerate(tasks):
            cid = child_id(run_id, call_id, n)
            out.append(Child(subagent_key(parent_key, cid), cid, label, task, mode))
        return out

    async def publish(self, agent: str, parent_key: str, child: Child, standing: Standing) -> None:
        """Start ``child``: its task on its lane, with the parent run's ``standing``."""
        now = int(time.time() * 1000)
        message = messages_pb2.InboundMessage(
            role=SUBAGENT_ROLE,
            channel=CHILD_CHANNEL,
            account="default",
            sender=parent_key,
            chat=messages_pb2.ChatRef(id=parent_key, type="direct"),
            text=child.task,
            message_id=child.message_id,
            received_at_ms=now,
            session_key=child.child_key,
            agent=agent,
            context=[
                messages_pb2.ContextMessage(
                    role="system", text=CHILD_PROMPT.format(parent=parent_key)
                )
            ],
        )
        msg_id = f"subagent:{child.child_key}"
        await self.append(child.child_key, agent, message, msg_id, standing)
        SUBAGENTS.labels(child.mode, "started").inc()

    async def append(
        self,
        key: str,
        agent: str,
        message: messages_pb2.InboundMessage,
        msg_id: str,
        standing: Standing,
    ) -> int:
        """Append an item to the lane of session ``key``, stamped with the ``standing`` its
        run gets at most; its stream sequence."""
        item = messages_pb2.LaneItem(
            session_key=key,
            agent=agent,
            message=message,
            enqueued_at_ms=int(time.time() * 1000),
            standing=str(standing),
        )
        subject = self.subjects.lane(agent, session_token(key))
        return await bus.js_publish(self.js, subject, item, msg_id=msg_id)

    async def reply(self, key: str, message_id: str, deadline: float) -> CommittedReply | None:
        """The committed reply to ``message_id`` in session ``key``, looked for until
        ``deadline`` (``time.monotonic()``); None if it did not come by then."""
        pause = POLL_S[0]
        while True:
            found = await committed_reply(self.pool, key, message_id)
            left = deadline - time.monotonic()
            if found is not None or left <= 0:
                return found
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 1.5, POLL_S[1])

    async def wait_all(
        self, agent: str, parent_key: str, children: list[Child], standing: Standing
    ) -> list[Outcome]:
        """Run ``children`` (with the parent run's ``standing``) at most
        ``subagent_concurrency`` at a time and wait for their replies until
        ``subagent_timeout_s``; the run's slot is lent meanwhile."""
        deadline = time.monotonic() + self.settings.subagent_timeout_s
        slots = asyncio.Semaphore(self.settings.subagent_concurrency)

        async def one(child: Child) -> Outcome:
            async with slots:
                if time.monotonic() >= deadline:
                    await self.store.drop(child.child_key)
                    return Outcome(child, "not_started")
                await self.publish(agent, parent_key, child, standing)
                found = await self.reply(child.child_key, child.message_id, deadline)
            if found is None and await self.store.to_background(child.child_key):
                SUBAGENTS.labels(WAIT, "timeout").inc()
                return Outcome(child, "timeout")
            if found is None:  # finished just now
                found = await committed_reply(self.pool, child.child_key, child.message_id)
            if found is None:  # cannot be: it is done only once its run committed
                return Outcome(child, "error", "its result could not be read")
            SUBAGENTS.labels(WAIT, found.status).inc()
            return Outcome(child, found.status, found.text)

        async with self.lend():
            return list(await asyncio.gather(*(one(c) for c in children)))

    async def committed(self, item: messages_pb2.LaneItem, text: str | None, status: str) -> None:
        """The runner's hook after a run committed (``text`` None: a replayed item, whose
        run some replica committed before): a background child's result is announced."""
        inbound = item.message
        if inbound.channel != CHILD_CHANNEL:
            return
        key, mid = item.session_key, inbound.message_id
        finished = await self.store.finish(key, mid)
        if finished is None and text is None:
            finished = await self.store.announce_pending(key, mid)
        if finished is None or finished.mode != BACKGROUND:
            return
        if text is None:
            found = await committed_reply(self.pool, key, mid)
            if found is None:
                return
            text, status = found.text, found.status
        origin = messages_pb2.LaneItem.FromString(finished.origin)
        message = messages_pb2.InboundMessage()
        message.CopyFrom(origin.message)
        for name in ("media", "context", "reply_to", "edited"):
            message.ClearField(name)
        name = f"{finished.label} ({key})" if finished.label else key
        ended = "finished" if status == "completed" else f"ended ({status})"
        message.text = f"[sub-agent {name} {ended}]\n{clipped(text)}"
        message.sender = CHILD_CHANNEL
        message.message_id = f"{mid}:announce"
        message.received_at_ms = int(time.time() * 1000)
        # The origin's role stays (its chat gets the reply); the standing is the child's.
        standing = run_standing(item)
        msg_id = f"subagent:{key}:announce"
        await self.append(finished.parent_key, item.agent, message, msg_id, standing)
        SUBAGENTS.labels(BACKGROUND, "announced").inc()
        log.info("sub-agent result announced", extra={"session": finished.parent_key})
