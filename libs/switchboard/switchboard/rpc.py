"""gRPC helpers: an aio server with health, reflection, tracing and metrics interceptors for
every kind of RPC (unary and streaming), and client channels that carry trace context and
always use a deadline."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from prometheus_client import Counter, Histogram

from .telemetry import extract_context, inject_headers

RPC_SECONDS = Histogram(
    "sb_grpc_server_handling_seconds", "gRPC server handling time", ["method", "code"]
)
RPC_CLIENT_CALLS = Counter("sb_grpc_client_calls_total", "gRPC client calls", ["method"])
DEFAULT_DEADLINE_S = 10.0

tracer = trace.get_tracer("switchboard.rpc")
# handler attribute -> the grpc function that builds a handler of that kind
_KINDS = {
    "unary_unary": grpc.unary_unary_rpc_method_handler,
    "unary_stream": grpc.unary_stream_rpc_method_handler,
    "stream_unary": grpc.stream_unary_rpc_method_handler,
    "stream_stream": grpc.stream_stream_rpc_method_handler,
}


@contextlib.contextmanager
def _server_span(method: str, metadata: Mapping[str, str]) -> Iterator[None]:
    """A SERVER span continuing the caller's trace, and the handling-time histogram."""
    start = time.perf_counter()
    code = "OK"
    with tracer.start_as_current_span(
        method.lstrip("/"), context=extract_context(metadata), kind=SpanKind.SERVER
    ) as span:
        span.set_attribute("rpc.system", "grpc")
        try:
            yield
        except Exception:
            code = "ERROR"
            span.set_status(Status(StatusCode.ERROR))
            raise
        finally:
            RPC_SECONDS.labels(method, code).observe(time.perf_counter() - start)


def _traced(inner: Callable[..., Any], method: str, metadata: Mapping[str, str]) -> Any:
    """``inner`` (a servicer method of any kind) inside a server span, in its own style: an
    async generator stays one (grpc forbids mixing it with ``context.write``)."""
    if inspect.isasyncgenfunction(inner):

        async def generator(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            with _server_span(method, metadata):
                async for response in inner(request, context):
                    yield response

        return generator

    async def coroutine(request: Any, context: grpc.aio.ServicerContext) -> Any:
        with _server_span(method, metadata):
            return await inner(request, context)

    return coroutine


class _ServerInterceptor(grpc.aio.ServerInterceptor):
    """Traces and times every async handler, unary or streaming."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        metadata = {k: v for k, v in (details.invocation_metadata or ()) if isinstance(v, str)}
        for kind, build in _KINDS.items():
            inner = getattr(handler, kind)
            if inner is None:
                continue
            if not (inspect.iscoroutinefunction(inner) or inspect.isasyncgenfunction(inner)):
                return handler  # a synchronous handler: left as it is
            return build(
                _traced(inner, details.method, metadata),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


def _client_details(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    """The call's details with W3C trace context in the metadata and a default deadline."""
    metadata = list(details.metadata or [])
    metadata.extend(inject_headers().items())
    method = details.method.decode() if isinstance(details.method, bytes) else details.method
    RPC_CLIENT_CALLS.labels(method).inc()
    return grpc.aio.ClientCallDetails(
        method=details.method,
        timeout=details.timeout if details.timeout is not None else DEFAULT_DEADLINE_S,
        metadata=metadata,
        credentials=details.credentials,
        wait_for_ready=details.wait_for_ready,
    )


class _UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_client_details(details), request)


class _UnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_client_details(details), request)


class _StreamUnary(grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, requests: Any
    ) -> Any:
        return await continuation(_client_details(details), requests)


class _StreamStream(grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, requests: Any
    ) -> Any:
        return await continuation(_client_details(details), requests)


@dataclass(frozen=True)
class Servicer:
    """A servicer and the generated ``add_<Name>Servicer_to_server`` function that serves it."""

    add: Callable[[Any, Any], None]
    impl: Any


class _NameRecorder:
    """Stands in for the server while a generated ``add_*_to_server`` registers a servicer, to
    learn the service's full name (for health and reflection) from the registration itself."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self.server = server
        self.names: list[str] = []

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, name: str, handlers: Any) -> None:
        self.names.append(name)
        self.server.add_registered_method_handlers(name, handlers)


class GrpcServer:
    """A grpc.aio server that serves grpc.health.v1 and reflection next to its services."""

    def __init__(self, servicers: tuple[Servicer, ...] | list[Servicer] = ()) -> None:
        self.server = grpc.aio.server(interceptors=[_ServerInterceptor()])
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        recorder = _NameRecorder(self.server)
        for servicer in servicers:
            servicer.add(servicer.impl, recorder)
        self.service_names = recorder.names
        reflection.enable_server_reflection(
            [*self.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], self.server
        )
        self.port = 0

    def bind(self, host: str, port: int) -> int:
        self.port = self.server.add_insecure_port(f"{host}:{port}")
        return self.port

    async def start(self) -> None:
        await self.server.start()

    async def set_serving(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ["", *self.service_names]:
            await self.health.set(name, status)

    async def stop(self, grace: float = 3.0) -> None:
        await self.server.stop(grace)


def channel(target: str) -> grpc.aio.Channel:
    """A client channel; several comma-separated addresses are load-balanced round robin."""
    addresses = [a.strip() for a in target.split(",") if a.strip()]
    if len(addresses) > 1:
        target = "ipv4:" + ",".join(addresses)
    return grpc.aio.insecure_channel(
        target,
        interceptors=[_UnaryUnary(), _UnaryStream(), _StreamUnary(), _StreamStream()],
        options=[
            ("grpc.lb_policy_name", "round_robin"),
            # gRPC waits 1 s (doubling to 2 min) before reconnecting to a server that was not
            # up yet: a system starting or a replica restarting is found sooner than that.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 5000),
        ],
    )


async def check_health(ch: grpc.aio.Channel, service: str = "", timeout: float = 1.0) -> bool:
    stub = health_pb2_grpc.HealthStub(ch)
    try:
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.aio.AioRpcError:
        return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
