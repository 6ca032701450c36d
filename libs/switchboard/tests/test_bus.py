"""Streams, idempotent set-up, dedupe and trace context over a real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

import nats
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import REGISTRY

from switchboard import bus
from switchboard.errors import InvalidPayload
from switchboard.telemetry import extract_context
from switchboard.v1 import messages_pb2

from .conftest import eventually


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


def test_subject_token_replaces_the_same_characters_as_the_slower_pattern_did() -> None:
    # The pattern before it was rewritten as one class (cheaper to compile at start-up):
    # every code point must still map as it did.
    former = re.compile(r"[.*>\s]|[^\x21-\x7e\u00a0-\U0010ffff]")
    everything = "".join(map(chr, range(0x110000)))
    assert bus.subject_token(everything) == former.sub("_", everything)
    assert bus.subject_token("a.b*c>d e\x7f\x85\u3000ü") == "a_b_c_d_e___ü"


def test_decode_parses_and_names_the_type_it_expected() -> None:
    sent = messages_pb2.InboundMessage(channel="api", text="hi")
    assert bus.decode(messages_pb2.InboundMessage, sent.SerializeToString()) == sent
    assert bus.decode(messages_pb2.InboundMessage, None) == messages_pb2.InboundMessage()
    assert bus.decode(messages_pb2.InboundMessage, b"") == messages_pb2.InboundMessage()
    with pytest.raises(InvalidPayload, match=r"not a switchboard\.v1\.InboundMessage") as raised:
        bus.decode(messages_pb2.InboundMessage, b"\x0a\x05ab")
    assert isinstance(raised.value, ValueError)


async def _worker_setup(nats_url: str, durable: str) -> tuple[Any, Any]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await bus.ensure_streams(js, bus.Subjects())
    sub = await bus.durable_pull(js, "TOOLS", durable, "sb.tools.call.>", ack_wait=30)
    return nc, sub


async def _publish_calls(js: Any, *call_ids: str) -> None:
    for call_id in call_ids:
        call = messages_pb2.ToolCall(call_id=call_id, run_id="r", tool="get_time")
        await bus.js_publish(js, "sb.tools.call.default", call, msg_id=call_id)


async def _stop(task: asyncio.Task[None], worker: bus.PullWorker) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await worker.drain()


async def test_pull_worker_handles_at_most_concurrency_at_once(nats_url: str) -> None:
    nc, sub = await _worker_setup(nats_url, "limit")
    release = asyncio.Event()
    active: list[str] = []
    done: list[str] = []
    try:

        async def handler(msg: Any) -> None:
            call = bus.decode(messages_pb2.ToolCall, msg.data)
            active.append(call.call_id)
            await release.wait()
            active.remove(call.call_id)
            done.append(call.call_id)
            await msg.ack()

        worker = bus.PullWorker(sub, handler, 2, "limit")
        task = asyncio.create_task(worker.run())
        await _publish_calls(nc.jetstream(), "a", "b", "c", "d", "e")
        assert await eventually(lambda: len(active) == 2)
        assert worker.saturated
        info = await nc.jetstream().consumer_info("TOOLS", "limit")
        assert info.num_ack_pending == 2  # the rest waits in the consumer, not in this process
        assert info.num_pending == 3
        release.set()
        assert await eventually(lambda: len(done) == 5)
        assert sorted(done) == ["a", "b", "c", "d", "e"]
        await _stop(task, worker)
        assert not worker.saturated
    finally:
        await nc.close()


async def test_a_failing_handler_naks_and_the_message_comes_back(nats_url: str) -> None:
    nc, sub = await _worker_setup(nats_url, "retry")
    deliveries: list[int] = []
    try:

        async def handler(msg: Any) -> None:
            deliveries.append(msg.metadata.num_delivered)
            if len(deliveries) == 1:
                raise RuntimeError("first attempt fails")
            await msg.ack()

        worker = bus.PullWorker(sub, handler, 1, "retry")
        task = asyncio.create_task(worker.run())
        await _publish_calls(nc.jetstream(), "x")
        assert await eventually(lambda: len(deliveries) == 2)
        assert deliveries == [1, 2]
        await _stop(task, worker)
        assert not worker.saturated  # the failed handler's slot was given back
    finally:
        await nc.close()


async def test_decoding_on_a_core_subscription_drops_undecodable_messages(nats_url: str) -> None:
    """No JetStream ack subject to terminate: the message is counted and dropped, and the
    handler only ever sees decoded payloads."""
    nc = await nats.connect(nats_url)
    got: list[str] = []
    try:

        async def handler(msg: Any, message: messages_pb2.InboundMessage) -> None:
            got.append(message.text)

        handle = bus.decoding(messages_pb2.InboundMessage, handler, "core-test")
        sub = await nc.subscribe("test.core")
        good = messages_pb2.InboundMessage(text="fine").SerializeToString()
        for data in (b"\x0a\x05ab", good):
            await nc.publish("test.core", data)
        before = _undecodable("core-test")
        await handle(await sub.next_msg(timeout=30))  # would raise if it tried to term()
        assert _undecodable("core-test") == before + 1
        assert got == []
        await handle(await sub.next_msg(timeout=30))
        assert got == ["fine"]
    finally:
        await nc.close()


def _undecodable(consumer: str) -> float:
    value = REGISTRY.get_sample_value("sb_bus_undecodable_total", {"consumer": consumer})
    return value or 0.0
