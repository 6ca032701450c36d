"""Aborting a session's run on request (WebChat's ``abort``): an ``AbortRun`` on
``sb.runs.abort`` reaches every agent replica; the one running that session's lane interrupts
the run the way a newer message does under the ``interrupt`` queue mode (its tool calls are
cancelled, its transcript closed, its status ``interrupted``). A session with no run here is
ignored: another replica owns it, or nothing is running. Sent as a request (Sessions.Abort,
``/stop``: :mod:`..sessions.admin`), the replica that interrupted the run answers it.
:func:`close_interrupted` is what the runner does with a run interrupted either way."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from switchboard import bus
from switchboard.v1 import messages_pb2

from ..approvals.store import ApprovalStore
from ..metrics import ABORTS
from ..sessions.store import RunRecord
from .queueing import RunControl
from .turn import pending_tool_uses

log = logging.getLogger(__name__)


class RunningRuns:
    """The runs in progress on this replica, by session key."""

    def __init__(self) -> None:
        self._runs: dict[str, tuple[asyncio.Task[None], RunControl]] = {}

    async def listen(self, nc: NATS, subjects: bus.Subjects) -> None:
        await nc.subscribe(
            subjects.runs_abort(),
            cb=bus.decoding(messages_pb2.AbortRun, self._on_abort, "run aborts"),
        )

    @contextlib.contextmanager
    def tracking(
        self, session_key: str, task: asyncio.Task[None], control: RunControl
    ) -> Iterator[None]:
        self._runs[session_key] = (task, control)
        try:
            yield
        finally:
            if self._runs.get(session_key, (None,))[0] is task:
                del self._runs[session_key]

    def abort(self, session_key: str) -> bool:
        """Interrupt the session's run if it runs here; whether it did."""
        found = self._runs.get(session_key)
        if found is None:
            return False
        task, control = found
        if task.done():
            return False
        control.interrupted = True
        task.cancel()
        return True

    async def _on_abort(self, msg: Msg, request: messages_pb2.AbortRun) -> None:
        if self.abort(request.session_key):
            if msg.reply:  # a request (Sessions.Abort, /stop): the one that stopped it answers
                await msg.respond(msg.data)
            ABORTS.inc()
            log.info(
                "run aborted on request",
                extra={"session": request.session_key, "by": request.requested_by},
            )


async def close_interrupted(
    record: RunRecord, nc: NATS, subjects: bus.Subjects, approvals: ApprovalStore | None
) -> None:
    """A newer message (or an abort) interrupted the run: stop its tool calls and close its
    transcript so a dangling tool_use never reaches the model."""
    record.status = "interrupted"
    record.stop_reason = "interrupted"
    if approvals is not None:
        await approvals.cancel_run(record.run_id, "interrupted by a newer message")
    await bus.core_publish(
        nc,
        subjects.tools_cancel(record.run_id),
        messages_pb2.ToolCancel(run_id=record.run_id, reason="interrupted"),
    )
    uses = pending_tool_uses(record.messages)
    if uses:
        record.messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": u["id"],
                        "content": "interrupted by a newer message",
                        "is_error": True,
                    }
                    for u in uses
                ],
            }
        )
