"""Agent events of one run on sb.events.<session-token>, with a monotonic per-run seq."""

from __future__ import annotations

import json
import time
from typing import Any

from nats.aio.client import Client as NATS

from switchboard import bus
from switchboard.v1 import messages_pb2


class RunEvents:
    def __init__(
        self,
        nc: NATS,
        subject: str,
        run_id: str,
        session_key: str,
        message_id: str,
        message_ids: list[str],
    ):
        self.nc = nc
        self.subject = subject
        self.run_id = run_id
        self.session_key = session_key
        self.message_id = message_id
        self.message_ids = message_ids  # grows when a steered message joins the run
        self.seq = 0

    async def emit(
        self, stream: str, phase: str, data: dict[str, Any] | None = None, **fields: Any
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
        await bus.core_publish(self.nc, self.subject, event)

    async def delta(self, text: str) -> None:
        await self.emit("assistant", "delta", text=text)
