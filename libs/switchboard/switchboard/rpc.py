"""gRPC helpers: an aio server with health, reflection, tracing and metrics interceptors, and
client channels that carry trace context and always use a deadline."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
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


class _ServerInterceptor(grpc.aio.ServerInterceptor):
    """Traces and times unary-unary handlers; the span continues the caller's trace."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        method: str = details.method
        metadata = {k: v for k, v in (details.invocation_metadata or ()) if isinstance(v, str)}
        inner = handler.unary_unary

        async def traced(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = time.perf_counter()
            code = "OK"
            with tracer.start_as_current_span(
                method.lstrip("/"), context=extract_context(metadata), kind=SpanKind.SERVER
            ) as span:
                span.set_attribute("rpc.system", "grpc")
                try:
                    return await inner(request, context)
                except Exception:
                    code = "ERROR"
                    span.set_status(Status(StatusCode.ERROR))
                    raise
                finally:
                    RPC_SECONDS.labels(method, code).observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            traced,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class _ClientInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds W3C trace context to the metadata and a default deadline when none was given."""

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        metadata = list(details.metadata or [])
        metadata.extend(inject_headers().items())
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        RPC_CLIENT_CALLS.labels(method).inc()
        new_details = grpc.aio.ClientCallDetails(
            method=details.method,
            timeout=details.timeout if details.timeout is not None else DEFAULT_DEADLINE_S,
            metadata=metadata,
            credentials=details.credentials,
            wait_for_ready=details.wait_for_ready,
        )
        return await continuation(new_details, request)


class GrpcServer:
    """A grpc.aio server that serves grpc.health.v1 and reflection next to its services."""

    def __init__(self, service_names: Sequence[str]) -> None:
        self.server = grpc.aio.server(interceptors=[_ServerInterceptor()])
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        names = [*service_names, health.SERVICE_NAME, reflection.SERVICE_NAME]
        reflection.enable_server_reflection(names, self.server)
        self.service_names = list(service_names)
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
        interceptors=[_ClientInterceptor()],
        options=[("grpc.lb_policy_name", "round_robin")],
    )


async def check_health(ch: grpc.aio.Channel, service: str = "", timeout: float = 1.0) -> bool:
    stub = health_pb2_grpc.HealthStub(ch)
    try:
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.aio.AioRpcError:
        return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)
