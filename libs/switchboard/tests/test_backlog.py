from __future__ import annotations

import nats

from switchboard import backlog, bus
from switchboard.v1 import messages_pb2


async def test_backlog_counts_pending_and_unacked_work(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        subjects = bus.Subjects()
        await bus.ensure_streams(js, subjects)
        sub = await bus.durable_pull(js, "TOOLS", "executor", "sb.tools.call.>", ack_wait=30)
        assert await backlog.refresh(js, "TOOLS", "executor") == (0, 0)
        for i in range(5):
            call = messages_pb2.ToolCall(call_id=f"c{i}", run_id="r", tool="get_time")
            await bus.js_publish(js, subjects.tools_call("default"), call, msg_id=f"r:c{i}")
        assert await backlog.refresh(js, "TOOLS", "executor") == (5, 0)
        [taken] = await sub.fetch(1, timeout=5)
        assert await backlog.refresh(js, "TOOLS", "executor") == (4, 1)
        await taken.ack_sync()
        assert await backlog.refresh(js, "TOOLS", "executor") == (4, 0)
        sample = backlog.BACKLOG.labels("TOOLS", "executor", "pending")._value.get()
        assert sample == 4
    finally:
        await nc.close()
