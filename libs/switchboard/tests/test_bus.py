"""Streams, idempotent set-up, dedupe and trace context over a real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import nats
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from switchboard import bus
from switchboard.telemetry import extract_context
from switchboard.v1 import messages_pb2


async def test_streams_are_created_idempotently_and_dedupe(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        subjects = bus.Subjects("sb")
        await bus.ensure_streams(js, subjects)
        await bus.ensure_streams(js, subjects)  # second service starting: no error
        names = {s.config.name for s in await js.streams_info()}
        assert {"INBOUND", "LANES", "TOOLS", "OUTBOUND", "EVENTS"} <= names
        await js.key_value(subjects.lease_bucket)
        msg = messages_pb2.InboundMessage(channel="api", text="hi", message_id="m1")
        first = await bus.js_publish(js, subjects.inbound("api"), msg, msg_id="api:x:m1")
        again = await bus.js_publish(js, subjects.inbound("api"), msg, msg_id="api:x:m1")
        assert first == again  # the retransmit is dropped by the dedupe window
        info = await js.stream_info("INBOUND")
        assert info.state.messages == 1
    finally:
        await nc.close()


async def test_trace_context_travels_in_headers(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    tracer = TracerProvider().get_tracer("test")
    try:
        js = nc.jetstream()
        subjects = bus.Subjects("t1")
        await bus.ensure_streams(js, subjects)
        assert {"T1_LANES"} <= {s.config.name for s in await js.streams_info()}
        with tracer.start_as_current_span("producer") as span:
            await bus.js_publish(
                js, subjects.lane("main", "abc"), messages_pb2.LaneItem(session_key="k")
            )
            expected = span.get_span_context().trace_id
        sub = await bus.durable_pull(js, subjects.stream("LANES"), "test", subjects.lanes())
        [msg] = await sub.fetch(1, timeout=2)
        ctx = extract_context(msg.headers)
        assert trace.get_current_span(ctx).get_span_context().trace_id == expected
        assert messages_pb2.LaneItem.FromString(msg.data).session_key == "k"
    finally:
        await nc.close()


async def test_a_handler_waiting_outside_lends_its_slot(nats_url: str) -> None:
    """One slot: the first message's handler waits (as a run waiting for an approval does)
    with its slot lent; the second message is handled meanwhile; then the first finishes."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        subjects = bus.Subjects()
        await bus.ensure_streams(js, subjects)
        sub = await bus.durable_pull(js, "TOOLS", "lend", "sb.tools.call.>", ack_wait=30)
        approved = asyncio.Event()
        order: list[str] = []
        worker: bus.PullWorker

        async def handler(msg: Any) -> None:
            call = messages_pb2.ToolCall()
            call.ParseFromString(msg.data)
            if call.call_id == "waits":
                async with worker.lend_slot():
                    await approved.wait()
            order.append(call.call_id)
            if call.call_id == "quick":
                approved.set()
            await msg.ack()

        worker = bus.PullWorker(sub, handler, 1, "test")
        task = asyncio.create_task(worker.run())
        for call_id in ("waits", "quick"):
            call = messages_pb2.ToolCall(call_id=call_id, run_id="r", tool="get_time")
            await bus.js_publish(js, "sb.tools.call.default", call, msg_id=call_id)
        for _ in range(100):
            if len(order) == 2:
                break
            await asyncio.sleep(0.05)
        assert order == ["quick", "waits"]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await worker.drain()
        assert not worker.saturated  # the lent slot came back: one free slot, as at the start
    finally:
        await nc.close()
