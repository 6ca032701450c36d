"""Streams, idempotent set-up, dedupe and trace context over a real nats-server."""

from __future__ import annotations

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
