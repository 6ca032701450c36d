"""gRPC helpers: an aio server with health, reflection, tracing and metrics interceptors for
every kind of RPC (unary and streaming), and client channels that carry trace context and
always use a deadline."""

from __future__ import annotations

import contextlib
import hmac
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
RPC_DENIED = Counter(
    "sb_grpc_server_unauthenticated_total",
    "gRPC calls refused for want of a credential",
    ["method"],
)
DEFAULT_DEADLINE_S = 10.0

tracer = trace.get_tracer("switchboard.rpc")
# handler attribute -> the grpc function that builds a handler of that kind
_KINDS = {
    "unary_unary": grpc.unary_unary_rpc_method_handler,
    "unary_stream": grpc.unary_stream_rpc_method_handler,
    "stream_unary": grpc.stream_unary_rpc_method_handler,
    "stream_stream": grpc.stream_stream_rpc_method_handler,
}


def _status(context: grpc.aio.ServicerContext, failed: bool) -> str:
    """The call's gRPC status name (``NOT_FOUND``...): what the handler aborted or set, else
    ``UNKNOWN`` for a handler that raised (what the caller gets), ``OK`` for one that returned."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    return "UNKNOWN" if failed else "OK"


@contextlib.contextmanager
def _server_span(
    method: str, metadata: Mapping[str, str], context: grpc.aio.ServicerContext
) -> Iterator[None]:
    """A SERVER span continuing the caller's trace, and the handling-time histogram labelled
    with the status the call ended with."""
    start = time.perf_counter()
    failed = False
    with tracer.start_as_current_span(
        method.lstrip("/"), context=extract_context(metadata), kind=SpanKind.SERVER
    ) as span:
        span.set_attribute("rpc.system", "grpc")
        try:
            yield
        except Exception:
            failed = True
            span.set_status(Status(StatusCode.ERROR))
            raise
        finally:
            code = _status(context, failed)
            RPC_SECONDS.labels(method, code).observe(time.perf_counter() - start)


def _traced(inner: Callable[..., Any], method: str, metadata: Mapping[str, str]) -> Any:
    """``inner`` (a servicer method of any kind) inside a server span, in its own style: an
    async generator stays one (grpc forbids mixing it with ``context.write``)."""
    if inspect.isasyncgenfunction(inner):

        async def generator(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            with _server_span(method, metadata, context):
                async for response in inner(request, context):
                    yield response

        return generator

    async def coroutine(request: Any, context: grpc.aio.ServicerContext) -> Any:
        with _server_span(method, metadata, context):
            return await inner(request, context)

    return coroutine


AUTHORIZATION = "authorization"
# Probes (kubelet, the gateway's readiness) call health without a credential; all else needs it.
_OPEN_SERVICES = (f"/{health.SERVICE_NAME}/",)


def _denied(kind: str) -> Any:
    """A handler of ``kind`` that refuses the call: the credential is missing or wrong."""

    async def deny(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong service credential")

    return _KINDS[kind](deny)


class _TokenInterceptor(grpc.aio.ServerInterceptor):
    """Every call but health must carry ``authorization: Bearer <service token>``."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or details.method.startswith(_OPEN_SERVICES):
            return handler
        given = next((v for k, v in (details.invocation_metadata or ()) if k == AUTHORIZATION), "")
        given_bytes = given.encode() if isinstance(given, str) else bytes(given)
        if hmac.compare_digest(given_bytes, self._expected):
            return handler
        RPC_DENIED.labels(details.method).inc()
        kind = next(k for k in _KINDS if getattr(handler, k) is not None)
        return _denied(kind)


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


def _client_details(details: grpc.aio.ClientCallDetails, token: str) -> grpc.aio.ClientCallDetails:
    """The call's details with the service credential and W3C trace context in the metadata,
    and a default deadline."""
    metadata = list(details.metadata or [])
    metadata.extend(inject_headers().items())
    if token:
        metadata.append((AUTHORIZATION, f"Bearer {token}"))
    method = details.method.decode() if isinstance(details.method, bytes) else details.method
    RPC_CLIENT_CALLS.labels(method).inc()
    return grpc.aio.ClientCallDetails(
        method=details.method,
        timeout=details.timeout if details.timeout is not None else DEFAULT_DEADLINE_S,
        metadata=metadata,
        credentials=details.credentials,
        wait_for_ready=details.wait_for_ready,
    )


class _WithToken:
    def __init__(self, token: str) -> None:
        self.token = token


class _UnaryUnary(_WithToken, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_client_details(details, self.token), request)


class _UnaryStream(_WithToken, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_client_details(details, self.token), request)


class _StreamUnary(_WithToken, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, requests: Any
    ) -> Any:
        return await continuation(_client_details(details, self.token), requests)


class _StreamStream(_WithToken, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, requests: Any
    ) -> Any:
        return await continuation(_client_details(details, self.token), requests)


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

    def __init__(
        self, servicers: tuple[Servicer, ...] | list[Servicer] = (), *, token: str
    ) -> None:
        """``token``: the service credential every call but health must carry."""
        if not token:
            raise ValueError("an internal gRPC server needs a service token (SB_SERVICE_TOKEN)")
        self.server = grpc.aio.server(interceptors=[_TokenInterceptor(token), _ServerInterceptor()])
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


def channel(target: str, token: str) -> grpc.aio.Channel:
    """A client channel that sends the service credential ``token``; several comma-separated
    addresses are load-balanced round robin."""
    addresses = [a.strip() for a in target.split(",") if a.strip()]
    if len(addresses) > 1:
        target = "ipv4:" + ",".join(addresses)
    return grpc.aio.insecure_channel(
        target,
        interceptors=[
            _UnaryUnary(token),
            _UnaryStream(token),
            _StreamUnary(token),
            _StreamStream(token),
        ],
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
