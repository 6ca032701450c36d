"""The gateway's FastAPI application: routes, error shapes, tracing and the shared clients."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from switchboard import registry, rpc
from switchboard.media import MediaClient
from switchboard.ops import Readiness, healthz, metrics, readyz_endpoint
from switchboard.runtime import ServiceRuntime, service_ready
from switchboard.telemetry import extract_context
from switchboard.v1 import (
    approvals_pb2_grpc,
    memory_pb2_grpc,
    router_pb2_grpc,
    scheduler_pb2_grpc,
    sessions_pb2_grpc,
)

from . import (
    approvals_api,
    config_api,
    cron_api,
    events_api,
    health_api,
    hooks_api,
    media_api,
    memory_api,
    openai_api,
    pairing_api,
    sessions_api,
    status_page,
    ui,  # the Control UI: its login, GET /ui and its scripts
    usage_api,
    webchat,  # webchat: GET /webchat and WS /webchat/ws
)
from .a2a_mount import LazyA2A, merge_openapi
from .auth import TokenAuth
from .channels import routes as channel_routes
from .channels.base import ChannelAdapter
from .channels.typing import Typing
from .config import GatewaySettings
from .conversations import Conversations
from .errors import install_error_handlers
from .json_bodies import JsonBodies
from .limits import BodyLimit, StreamSlots
from .mcp_mount import PATH as MCP_PATH
from .mcp_mount import LazyMcp
from .metrics import REQUEST_SECONDS, REQUESTS
from .web import assets as web_assets

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.gateway")
UNTRACED = {"/", "/healthz", "/readyz", "/metrics"}


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
        start = time.perf_counter()

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
                log.info("%s %s %s", scope["method"], scope["path"], status["code"])
                path = getattr(scope.get("route"), "path", "unmatched")
                REQUESTS.labels(path, str(status["code"])).inc()
                REQUEST_SECONDS.labels(path).observe(time.perf_counter() - start)


def add_system_readiness(
    readiness: Readiness, rt: ServiceRuntime, channels: dict[str, grpc.aio.Channel]
) -> None:
    """The gateway's /readyz is the system's: every other service of the registry answers
    ready over NATS, and the gRPC servers the gateway calls report SERVING (the runtime's own
    readiness already checks NATS)."""
    for service in registry.SERVICES:
        if service.name == rt.name:
            continue

        async def ready(name: str = service.name) -> bool:
            return await service_ready(rt.nc, rt.subjects, name)

        readiness.add(service.name, ready)
    for callee, ch in channels.items():

        async def serving(ch: grpc.aio.Channel = ch) -> bool:
            return await rpc.check_health(ch)

        readiness.add(f"{callee}_grpc", serving)


def create_app(
    settings: GatewaySettings,
    rt: ServiceRuntime,
    channels: dict[str, ChannelAdapter],
    typing: Typing | None = None,
) -> FastAPI:
    """The gateway's API; ``channels``: the chat channels whose webhooks it serves; ``typing``:
    their typing indicators (made here when not given)."""
    callees = registry.get(rt.name).calls
    token = settings.service_token.get_secret_value()
    grpc_channels = {name: rpc.channel(settings.address(name), token) for name in callees}
    agent = grpc_channels["agent"]

    typing = typing or Typing(rt.nc, rt.subjects)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if channels:
            await typing.start()
        async with mcp.running():  # mcp: made below, once app.state is
            yield
        await typing.close()
        for ch in grpc_channels.values():
            await ch.close()

    app = FastAPI(
        title="Switchboard gateway",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,  # served below, behind the token like every route but the public ones
        # FastAPI's own OpenTelemetry instrumentation (on by default once a tracer provider is
        # set) would add a second server span per request beside TraceMiddleware's, spans for
        # dependencies and serialization, the query string and its own HTTP metrics: the
        # gateway's spans and metrics are its own (half a millisecond of CPU per request).
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
    )
    app.state.settings = settings
    app.state.conversations = Conversations(rt.nc, rt.js, rt.subjects, settings.publish_retry_s)
    app.state.sessions = sessions_pb2_grpc.SessionsStub(agent)
    app.state.approvals = approvals_pb2_grpc.ApprovalsStub(agent)
    app.state.tool_access = approvals_pb2_grpc.ToolAccessStub(agent)
    app.state.router_admin = router_pb2_grpc.RouterAdminStub(grpc_channels["router"])
    app.state.memory = memory_pb2_grpc.MemoryStub(grpc_channels["memory"])
    app.state.scheduler = scheduler_pb2_grpc.SchedulerStub(grpc_channels["scheduler"])
    app.state.media = MediaClient(grpc_channels["media"])
    app.state.channels = channels
    app.state.typing = typing
    app.state.streams = StreamSlots(settings.max_streams_per_token)

    add_system_readiness(rt.readiness, rt, grpc_channels)
    app.add_api_route("/", status_page.page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/healthz", healthz, methods=["GET"], include_in_schema=False)
    app.add_api_route(
        "/readyz", readyz_endpoint(rt.readiness), methods=["GET"], include_in_schema=False
    )
    app.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)

    async def openapi() -> JSONResponse:
        return JSONResponse(merge_openapi(app.openapi(), await a2a.openapi()))

    app.add_api_route("/openapi.json", openapi, methods=["GET"], include_in_schema=False)
    app.include_router(openai_api.router)
    app.include_router(sessions_api.router)
    app.include_router(events_api.router)
    app.include_router(approvals_api.router)
    app.include_router(pairing_api.router)
    app.include_router(memory_api.router)
    app.include_router(cron_api.router)
    app.include_router(media_api.router)  # media: GET /api/media/{sha256}
    app.include_router(usage_api.router)
    app.include_router(health_api.router(rt))  # GET /api/health: services, queues
    app.include_router(config_api.router)  # GET /api/config: settings redacted, audit
    app.include_router(webchat.router)  # webchat: the page (public) and its WebSocket
    app.include_router(web_assets.router)  # the pages' vendored libraries (public)
    app.include_router(ui.router)  # the Control UI: login (public, checks itself), pages
    mcp = LazyMcp(app.state)  # mcp: streamable HTTP at /mcp, behind the token
    app.router.routes.append(Route(MCP_PATH, mcp, methods=["POST"]))
    if channels:
        app.include_router(channel_routes.router)
    hooks_api.mount(app, settings, channels)  # hooks: POST /hooks/* when configured
    a2a = LazyA2A(settings, app.state.conversations)  # a2a: card and POST /a2a, on first use
    app.router.routes.extend(a2a.routes())
    install_error_handlers(app)
    # After authentication, before any route's parser: JSON bodies nested past jsonsafe's
    # bound are refused (json_bodies.py says why there).
    app.add_middleware(JsonBodies, max_bytes=settings.max_request_bytes)
    app.add_middleware(TokenAuth, token=settings.gateway_token.get_secret_value())
    # Before authentication and any parsing: an oversized body is refused from its headers.
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)
    app.add_middleware(TraceMiddleware)  # outermost: refused requests are traced and counted
    return app
