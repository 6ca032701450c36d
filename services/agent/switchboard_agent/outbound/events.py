"""Agent events of one run on sb.events.<session-token>, with a monotonic per-run seq.

Assistant deltas are coalesced: text that streams in within ``coalesce_s`` of the first pending
piece goes out as one event (a model streams a token at a time; a client renders every 30 ms
just as well, and each event costs a publish here, a message in NATS and a write in the
gateway). Any other event first flushes the pending text, so the order is kept. Events carry no
trace headers: they fan out to clients, and the run's span already links the trace.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from nats.aio.client import Client as NATS

from switchboard.v1 import messages_pb2

DELTA_COALESCE_S = 0.03


class RunEvents:
    def __init__(
        self,
        nc: NATS,
        subject: str,
        run_id: str,
        session_key: str,
        message_id: str,
        message_ids: list[str],
        coalesce_s: float = DELTA_COALESCE_S,
    ):
        self.nc = nc
        self.subject = subject
        self.run_id = run_id
        self.session_key = session_key
        self.message_id = message_id
        self.message_ids = message_ids  # grows when a steered message joins the run
        self.coalesce_s = coalesce_s
        self.seq = 0
        self._text: list[str] = []
        self._timer: asyncio.TimerHandle | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one publish at a time: seq order is publish order

    async def emit(
        self, stream: str, phase: str, data: dict[str, Any] | None = None, **fields: Any
    ) -> None:
        async with self._lock:
            await self._flush_text()
            await self._publish(stream, phase, data, fields)

    async def delta(self, text: str) -> None:
        self._text.append(text)
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.coalesce_s, self._on_timer)

    async def flush(self) -> None:
        async with self._lock:
            await self._flush_text()

    def _on_timer(self) -> None:
        self._timer = None
        if self._text:
            self._flusher = asyncio.get_running_loop().create_task(self.flush())

    async def _flush_text(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._text:
            text = "".join(self._text)
            self._text.clear()
            await self._publish("assistant", "delta", None, {"text": text})

    async def _publish(
        self, stream: str, phase: str, data: dict[str, Any] | None, fields: dict[str, Any]
    ) -> None:
        self.seq += 1
        event = messages_pb2.AgentEvent(
            run_id=self.run_id,
            session_key=self.session_key,
            message_id=self.message_id,
            message_ids=self.message_ids,
            seq=self.seq,
            stream=stream,
            phase=phase,
            ts_ms=int(time.time() * 1000),
            data_json=json.dumps(data) if data else "",
            **fields,
        )
        await self.nc.publish(self.subject, event.SerializeToString())
