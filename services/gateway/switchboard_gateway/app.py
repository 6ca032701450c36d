"""The gateway's FastAPI application: routes, error shapes, tracing and the shared clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from switchboard import rpc
from switchboard.ops import healthz, metrics, readyz_endpoint
from switchboard.runtime import ServiceRuntime, service_ready
from switchboard.telemetry import extract_context
from switchboard.v1 import approvals_pb2_grpc, sessions_pb2_grpc

from . import approvals_api, events_api, openai_api, sessions_api
from .config import GatewaySettings
from .conversations import Conversations
from .errors import install_error_handlers
from .metrics import REQUESTS

tracer = trace.get_tracer("switchboard.gateway")
UNTRACED = {"/healthz", "/readyz", "/metrics"}
DEPENDENCIES = ("router", "agent", "tools")


class TraceMiddleware:
    """One SERVER span per request, continuing a caller's traceparent when given."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNTRACED:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        status = {"code": 500}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        with tracer.start_as_current_span(
            "gateway.receive", context=extract_context(headers), kind=SpanKind.SERVER
        ) as span:
            span.set_attribute("http.request.method", scope["method"])
            span.set_attribute("url.path", scope["path"])
            try:
                await self.app(scope, receive, send_wrapper)
            finally:
                span.set_attribute("http.response.status_code", status["code"])
                if status["code"] >= 500:
                    span.set_status(Status(StatusCode.ERROR))
                route = scope.get("route")
                REQUESTS.labels(getattr(route, "path", "unmatched"), str(status["code"])).inc()


def create_app(settings: GatewaySettings, rt: ServiceRuntime) -> FastAPI:
    channel = rpc.channel(settings.agent_addr)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await channel.close()

    app = FastAPI(title="Switchboard gateway", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.conversations = Conversations(rt.nc, rt.js, rt.subjects)
    app.state.sessions = sessions_pb2_grpc.SessionsStub(channel)
    app.state.approvals = approvals_pb2_grpc.ApprovalsStub(channel)
    app.state.tool_access = approvals_pb2_grpc.ToolAccessStub(channel)

    async def agent_grpc_ok() -> bool:
        return await rpc.check_health(channel)

    # The runtime's readiness already checks NATS; the gateway adds what it depends on.
    rt.readiness.add("agent_grpc", agent_grpc_ok)
    for name in DEPENDENCIES:

        async def check(name: str = name) -> bool:
            return await service_ready(rt.nc, rt.subjects, name)

        rt.readiness.add(name, check)

    app.add_api_route("/healthz", healthz, methods=["GET"], include_in_schema=False)
    app.add_api_route(
        "/readyz", readyz_endpoint(rt.readiness), methods=["GET"], include_in_schema=False
    )
    app.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
    app.include_router(openai_api.router)
    app.include_router(sessions_api.router)
    app.include_router(events_api.router)
    app.include_router(approvals_api.router)
    install_error_handlers(app)
    app.add_middleware(TraceMiddleware)
    return app
