"""Aborting a session's run on request (WebChat's ``abort``): an ``AbortRun`` on
``sb.runs.abort`` reaches every agent replica; the one running that session's lane interrupts
the run the way a newer message does under the ``interrupt`` queue mode (its tool calls are
cancelled, its transcript closed, its status ``interrupted``). A session with no run here is
ignored: another replica owns it, or nothing is running. Sent as a request (Sessions.Abort,
``/stop``: :mod:`session_admin`), the replica that interrupted the run answers it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from switchboard import bus
from switchboard.v1 import messages_pb2

from .metrics import ABORTS
from .queueing import RunControl

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
