"""Process requests between executor replicas, over core NATS.

Replicas share one TOOLS work queue, so ``poll``/``kill`` of a process may land on a replica that
does not run it. The handle names the owner (``p_<executor id>_<n>``); every executor answers
requests for its own processes on ``sb.tools.proc.<executor id>`` and ``list`` broadcasts on
``sb.tools.procs`` (no queue group: every executor answers). Payloads are JSON: requests
``{"op", "agent", "handle", "wait_s", "scope"}``, replies ``{"executor", "result"}`` or
``{"executor", "error"}``. The owner checks the agent and the scope (the private workspace's
session, ``""`` for the agent's), as for a local call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from switchboard.bus import Subjects
from switchboard_tools.errors import ToolError
from switchboard_tools.procs import GONE, ProcessManager

log = logging.getLogger(__name__)

# Beyond a poll's own wait: how long the owner may take to answer.
ANSWER_TIMEOUT_S = 5.0
# How long ``list`` collects answers from the other executors.
GATHER_WINDOW_S = 0.3


class ProcessBus:
    """Serves ``manager``'s processes to the other executors and is its :class:`Peers`."""

    def __init__(
        self,
        nc: NATS,
        subjects: Subjects,
        manager: ProcessManager,
        *,
        answer_timeout_s: float = ANSWER_TIMEOUT_S,
        gather_window_s: float = GATHER_WINDOW_S,
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.manager = manager
        self.answer_timeout_s = answer_timeout_s
        self.gather_window_s = gather_window_s
        self._subs: list[Subscription] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        own = self.subjects.tools_proc(self.manager.executor_id)
        self._subs.append(await self.nc.subscribe(own, cb=self._on_request))
        self._subs.append(await self.nc.subscribe(self.subjects.tools_procs(), cb=self._on_request))
        self.manager.peers = self

    async def stop(self) -> None:
        self.manager.peers = None
        for sub in self._subs:
            await sub.unsubscribe()
        self._subs.clear()
        if self.nc.is_connected:
            await self.nc.flush(timeout=2)  # from now on, requests find no responder here
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=2.0)

    async def _on_request(self, msg: Msg) -> None:
        # A poll may wait: answer on a task so other requests are not held up behind it.
        task = asyncio.create_task(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, msg: Msg) -> None:
        reply: dict[str, Any] = {"executor": self.manager.executor_id}
        try:
            request = json.loads(msg.data)
            if not isinstance(request, dict):
                raise ToolError("process request must be a JSON object")
            reply["result"] = await self.manager.handle_request(request)
        except ToolError as exc:
            reply["error"] = exc.message
        except ValueError:
            reply["error"] = "undecodable process request"
        except Exception:
            log.exception("process request on %s failed", msg.subject)
            reply["error"] = "the executor running this process failed to answer (internal error)"
        if msg.reply:
            await msg.respond(json.dumps(reply).encode())

    async def forward(self, executor: str, request: dict[str, Any]) -> dict[str, Any]:
        """Send ``request`` to the executor that owns the process and return its result."""
        subject = self.subjects.tools_proc(executor)
        timeout = float(request.get("wait_s", 0.0)) + self.answer_timeout_s
        handle = request.get("handle", "")
        try:
            msg = await self.nc.request(subject, json.dumps(request).encode(), timeout=timeout)
        except NoRespondersError as exc:
            raise ToolError(f"Process {handle}: {GONE}") from exc
        except NatsTimeoutError as exc:
            raise ToolError(
                f"Process {handle}: the executor that started it did not answer within "
                f"{timeout:g}s; try again"
            ) from exc
        reply = json.loads(msg.data)
        if "error" in reply:
            raise ToolError(str(reply["error"]))
        result: dict[str, Any] = reply["result"]
        return result

    async def gather(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """Broadcast ``request`` and collect the other executors' answers for a short window."""
        inbox = self.nc.new_inbox()
        items: list[dict[str, Any]] = []

        async def collect(msg: Msg) -> None:
            try:
                reply = json.loads(msg.data)
            except ValueError:
                log.warning("undecodable process list answer on %s", msg.subject)
                return
            executor = reply.get("executor")
            if executor == self.manager.executor_id:
                return  # our own processes are listed locally
            if "error" in reply:
                log.warning("executor %s could not list processes: %s", executor, reply["error"])
                return
            items.extend(reply.get("result", []))

        sub = await self.nc.subscribe(inbox, cb=collect)
        try:
            await self.nc.publish(
                self.subjects.tools_procs(), json.dumps(request).encode(), reply=inbox
            )
            await asyncio.sleep(self.gather_window_s)
        finally:
            await sub.unsubscribe()
        return items
