"""The gRPC server traces and times every kind of RPC; client channels carry the trace context
and a default deadline. Real server, real client, real OTLP receiver."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from opentelemetry import trace
from opentelemetry.proto.trace.v1 import trace_pb2
from prometheus_client import REGISTRY

from switchboard import rpc
from switchboard.settings import CommonSettings
from switchboard.telemetry import Telemetry, enter_service, setup_telemetry
from switchboard.v1 import sessions_pb2, sessions_pb2_grpc
from tests.support.otlp import ReceivedSpan

from .conftest import Receiver, eventually

SERVER = trace_pb2.Span.SpanKind.SPAN_KIND_SERVER
HEALTH = "grpc.health.v1.Health"
REFLECTION = "grpc.reflection.v1alpha.ServerReflection"
SESSIONS = "switchboard.v1.Sessions"
UPLOAD = "/test.Upload/Count"
FAIL = "/test.Upload/Fail"
MISSING = "/test.Upload/Missing"
TOKEN = "test-service-token-0123456789abcdef"
BEARER = (("authorization", f"Bearer {TOKEN}"),)


def handled(method: str, code: str = "OK") -> float:
    """Samples of the handling-time histogram for ``method`` so far."""
    value = REGISTRY.get_sample_value(
        "sb_grpc_server_handling_seconds_count", {"method": method, "code": code}
    )
    return value or 0.0


class Sessions(sessions_pb2_grpc.SessionsServicer):
    """A real generated servicer, served through rpc.Servicer."""

    async def List(
        self, request: sessions_pb2.ListSessionsRequest, context: Any
    ) -> sessions_pb2.ListSessionsResponse:
        info = sessions_pb2.SessionInfo(session_key="k", agent=request.agent)
        return sessions_pb2.ListSessionsResponse(sessions=[info])


@dataclass
class Uploads:
    """A stream-unary handler (bytes in, bytes out) that notes what each call carried."""

    metadata: list[dict[str, str]] = field(default_factory=list)
    remaining: list[float | None] = field(default_factory=list)

    async def count(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> bytes:
        self.metadata.append({k: v for k, v in context.invocation_metadata() or ()})
        self.remaining.append(context.time_remaining())
        total = 0
        async for chunk in requests:
            total += len(chunk)
        return str(total).encode()

    async def fail(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        raise RuntimeError("handler broke")

    async def missing(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
        raise AssertionError("context.abort raises")

    def handlers(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            "test.Upload",
            {
                "Count": grpc.stream_unary_rpc_method_handler(self.count),
                "Fail": grpc.unary_unary_rpc_method_handler(self.fail),
                "Missing": grpc.unary_unary_rpc_method_handler(self.missing),
            },
        )


@dataclass
class Served:
    server: rpc.GrpcServer
    uploads: Uploads
    telemetry: Telemetry
    target: str


async def _serve(otlp: Receiver) -> Served:
    """A GrpcServer with a generated servicer and the generic upload handlers, traced as
    service ``rpc-test`` (run in the test's own task: enter_service marks that task)."""
    enter_service("rpc-test")
    settings = CommonSettings.from_environ({"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint})
    telemetry = setup_telemetry("rpc-test", "switchboard-rpc-test", settings)
    server = rpc.GrpcServer(
        [rpc.Servicer(sessions_pb2_grpc.add_SessionsServicer_to_server, Sessions())],
        token=TOKEN,
    )
    uploads = Uploads()
    server.server.add_generic_rpc_handlers((uploads.handlers(),))
    port = server.bind("127.0.0.1", 0)
    await server.start()
    await server.set_serving(True)
    return Served(server, uploads, telemetry, f"127.0.0.1:{port}")


async def _chunks() -> AsyncIterator[bytes]:
    for chunk in (b"ab", b"cde", b"f"):
        yield chunk


def _server_span(spans: list[ReceivedSpan], method: str, parent: str) -> ReceivedSpan | None:
    return next((s for s in spans if s.name == method.lstrip("/") and s.parent_id == parent), None)


async def _every_kind(otlp: Receiver) -> None:
    served = await _serve(otlp)
    tracer = trace.get_tracer("test.client")
    methods = {
        "unary": f"/{HEALTH}/Check",
        "unary-stream": f"/{HEALTH}/Watch",
        "stream-stream": f"/{REFLECTION}/ServerReflectionInfo",
        "stream-unary": UPLOAD,
        "generated unary": f"/{SESSIONS}/List",
    }
    before = {kind: handled(method) for kind, method in methods.items()}
    clients: dict[str, Any] = {}
    try:
        async with rpc.channel(served.target, TOKEN) as ch:
            with tracer.start_as_current_span("client unary") as span:
                clients["unary"] = span
                reply = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
                assert reply.status == health_pb2.HealthCheckResponse.SERVING

            with tracer.start_as_current_span("client unary-stream") as span:
                clients["unary-stream"] = span
                watch = health_pb2_grpc.HealthStub(ch).Watch(
                    health_pb2.HealthCheckRequest(service=SESSIONS)
                )
                first = await watch.read()
                assert first.status == health_pb2.HealthCheckResponse.SERVING
                watch.cancel()

            with tracer.start_as_current_span("client stream-stream") as span:
                clients["stream-stream"] = span

                async def ask() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
                    yield reflection_pb2.ServerReflectionRequest(list_services="")

                stub = reflection_pb2_grpc.ServerReflectionStub(ch)
                replies = [r async for r in stub.ServerReflectionInfo(ask())]
                listed = {s.name for r in replies for s in r.list_services_response.service}
                assert {HEALTH, REFLECTION, SESSIONS} <= listed

            with tracer.start_as_current_span("client stream-unary") as span:
                clients["stream-unary"] = span
                assert await ch.stream_unary(UPLOAD)(_chunks()) == b"6"

            with tracer.start_as_current_span("client generated unary") as span:
                clients["generated unary"] = span
                listing = await sessions_pb2_grpc.SessionsStub(ch).List(
                    sessions_pb2.ListSessionsRequest(agent="main")
                )
                assert [s.agent for s in listing.sessions] == ["main"]

        # every kind is timed (Watch ends on the server once it sees the cancellation)
        for kind, method in methods.items():
            expected = before[kind] + 1
            assert await eventually(lambda: handled(method) >= expected), kind  # noqa: B023
            assert handled(method) == expected, kind
    finally:
        await served.server.stop(0)
        served.telemetry.shutdown()  # flushes the batch exporter

    parents = {kind: format(s.get_span_context().span_id, "016x") for kind, s in clients.items()}
    traces = {kind: format(s.get_span_context().trace_id, "032x") for kind, s in clients.items()}
    spans = await otlp.until(
        lambda got: all(_server_span(got, methods[k], parents[k]) for k in methods)
    )
    for kind, method in methods.items():
        received = _server_span(spans, method, parents[kind])
        assert received is not None, f"{kind}: no server span of {method} under the client's"
        assert received.trace_id == traces[kind], kind
        assert received.service == "switchboard-rpc-test", kind
        assert received.attributes.get("rpc.system") == "grpc", kind
        assert otlp.kind(received) == SERVER, kind
    # the client spans were exported too: the parents are real spans of the same trace
    client_ids = {s.span_id for s in spans if s.name.startswith("client ")}
    assert set(parents.values()) <= client_ids


async def test_server_traces_and_times_every_kind_of_rpc(otlp: Receiver) -> None:
    await asyncio.create_task(_every_kind(otlp))  # its own task: the service mark stays there


async def _deadlines_and_metadata(otlp: Receiver) -> None:
    served = await _serve(otlp)
    try:
        async with rpc.channel(served.target, TOKEN) as ch:
            with trace.get_tracer("test.client").start_as_current_span("caller") as span:
                assert await ch.stream_unary(UPLOAD)(_chunks()) == b"6"
                assert await ch.stream_unary(UPLOAD)(_chunks(), timeout=600) == b"6"
                trace_id = format(span.get_span_context().trace_id, "032x")
        async with grpc.aio.insecure_channel(served.target) as plain:  # no interceptors
            assert await plain.stream_unary(UPLOAD)(_chunks(), metadata=BEARER) == b"6"
    finally:
        await served.server.stop(0)
        served.telemetry.shutdown()
    defaulted, explicit, plain_call = served.uploads.remaining
    assert plain_call is None  # without rpc.channel() a call has no deadline at all
    # (the grpc-timeout header rounds the deadline up a little: allow one second of it)
    assert defaulted is not None and 0 < defaulted <= rpc.DEFAULT_DEADLINE_S + 1
    assert explicit is not None and explicit > rpc.DEFAULT_DEADLINE_S + 1  # a given one is kept
    traced, _, untraced = served.uploads.metadata
    assert trace_id in traced.get("traceparent", ""), traced
    assert "traceparent" not in untraced


async def test_channel_injects_traceparent_and_a_default_deadline(otlp: Receiver) -> None:
    await asyncio.create_task(_deadlines_and_metadata(otlp))


async def _errors(otlp: Receiver) -> None:
    served = await _serve(otlp)
    before = handled(FAIL, "UNKNOWN"), handled(MISSING, "NOT_FOUND")
    try:
        async with rpc.channel(served.target, TOKEN) as ch:
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await ch.unary_unary(FAIL)(b"x")
            assert raised.value.code() == grpc.StatusCode.UNKNOWN
            # The histogram's code is the status the caller got: a handler that raised is
            # UNKNOWN, an abort keeps its status (dashboards and alerts tell them apart).
            assert await eventually(lambda: handled(FAIL, "UNKNOWN") > before[0])
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await ch.unary_unary(MISSING)(b"x")
            assert raised.value.code() == grpc.StatusCode.NOT_FOUND
            assert await eventually(lambda: handled(MISSING, "NOT_FOUND") > before[1])
    finally:
        await served.server.stop(0)
        served.telemetry.shutdown()
    spans = await otlp.until(lambda got: any(s.name == FAIL.lstrip("/") for s in got))
    assert any(s.name == FAIL.lstrip("/") for s in spans)


async def test_a_failing_handler_is_timed_as_an_error(otlp: Receiver) -> None:
    await asyncio.create_task(_errors(otlp))


async def test_check_health_of_the_server_and_each_service(otlp: Receiver) -> None:
    async def run() -> None:
        served = await _serve(otlp)
        try:
            async with rpc.channel(served.target, TOKEN) as ch:
                assert await rpc.check_health(ch)
                assert await rpc.check_health(ch, SESSIONS)
                assert served.server.service_names == [SESSIONS]
                await served.server.set_serving(False)
                assert not await rpc.check_health(ch)
                assert not await rpc.check_health(ch, SESSIONS)
                assert not await rpc.check_health(ch, "no.Such")  # NOT_FOUND: not healthy
        finally:
            await served.server.stop(0)
            served.telemetry.shutdown()

    await asyncio.create_task(run())


async def test_channel_balances_over_several_addresses(otlp: Receiver) -> None:
    async def run() -> None:
        first, second = await _serve(otlp), await _serve(otlp)
        try:
            async with rpc.channel(f"{first.target}, {second.target}", TOKEN) as ch:
                # round robin over the addresses that are connected: both, once both are
                for _ in range(200):
                    assert await ch.stream_unary(UPLOAD)(_chunks()) == b"6"
                    if first.uploads.remaining and second.uploads.remaining:
                        break
            assert first.uploads.remaining and second.uploads.remaining
        finally:
            for served in (first, second):
                await served.server.stop(0)
                served.telemetry.shutdown()

    await asyncio.create_task(run())


async def _credentials(otlp: Receiver) -> None:
    served = await _serve(otlp)
    denied_before = REGISTRY.get_sample_value(
        "sb_grpc_server_unauthenticated_total", {"method": f"/{SESSIONS}/List"}
    )
    try:
        async with grpc.aio.insecure_channel(served.target) as plain:
            list_sessions = plain.unary_unary(
                f"/{SESSIONS}/List",
                request_serializer=sessions_pb2.ListSessionsRequest.SerializeToString,
                response_deserializer=sessions_pb2.ListSessionsResponse.FromString,
            )
            wrong = (("authorization", "Bearer not-the-token"),)
            for metadata in ((), wrong, (("authorization", TOKEN),)):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await list_sessions(sessions_pb2.ListSessionsRequest(), metadata=metadata)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as streaming:  # client streaming too
                await plain.stream_unary(UPLOAD)(_chunks())
            assert streaming.value.code() == grpc.StatusCode.UNAUTHENTICATED
            # Reflection would tell a stranger what there is to call: closed as well.
            stub = reflection_pb2_grpc.ServerReflectionStub(plain)
            request = reflection_pb2.ServerReflectionRequest(list_services="")
            with pytest.raises(grpc.aio.AioRpcError) as reflecting:
                async for _ in stub.ServerReflectionInfo(iter([request])):
                    pass
            assert reflecting.value.code() == grpc.StatusCode.UNAUTHENTICATED
            # Health stays open for probes; the right credential opens the rest.
            health = await health_pb2_grpc.HealthStub(plain).Check(health_pb2.HealthCheckRequest())
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            await list_sessions(sessions_pb2.ListSessionsRequest(), metadata=BEARER)
    finally:
        await served.server.stop(0)
        served.telemetry.shutdown()
    denied = REGISTRY.get_sample_value(
        "sb_grpc_server_unauthenticated_total", {"method": f"/{SESSIONS}/List"}
    )
    assert (denied or 0) - (denied_before or 0) == 3


async def test_every_call_but_health_needs_the_service_credential(otlp: Receiver) -> None:
    await asyncio.create_task(_credentials(otlp))


def test_a_server_without_a_token_is_refused() -> None:
    with pytest.raises(ValueError, match="SB_SERVICE_TOKEN"):
        rpc.GrpcServer([], token="")
