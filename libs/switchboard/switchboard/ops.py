"""Readiness checks and the small ops HTTP server (/healthz, /readyz, /metrics) that every
service without its own HTTP API runs for probes and Prometheus."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

log = logging.getLogger(__name__)

Check = Callable[[], Awaitable[bool]]


class Readiness:
    """Named async checks; ready when every one passes within its timeout. A check that starts
    failing is logged once with the reason (and its recovery once), not at every probe."""

    def __init__(self) -> None:
        self.checks: dict[str, Check] = {}
        # Shown by /readyz next to the checks, without deciding readiness (the agent's plugins).
        self.details: dict[str, Any] = {}
        self._failing: dict[str, str] = {}  # check -> why, while it fails

    def add(self, name: str, check: Check) -> None:
        self.checks[name] = check

    async def evaluate(self, timeout: float = 1.0) -> dict[str, bool]:
        async def run(name: str) -> bool:
            try:
                ok = await asyncio.wait_for(self.checks[name](), timeout)
                why = "" if ok else "the check said no"
            except TimeoutError:
                ok, why = False, f"no answer within {timeout:g}s"
            except Exception as exc:
                ok, why = False, f"{type(exc).__name__}: {exc}"
            self._note(name, why)
            return bool(ok)

        names = list(self.checks)
        results = await asyncio.gather(*(run(n) for n in names))
        return dict(zip(names, results, strict=True))

    def _note(self, name: str, why: str) -> None:
        before = self._failing.get(name)
        if why and before is None:
            log.warning("not ready: %s failed (%s)", name, why)
            self._failing[name] = why
        elif not why and before is not None:
            log.info("ready again: %s passes", name)
            del self._failing[name]


async def healthz(_: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def metrics(_: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def readyz_endpoint(readiness: Readiness) -> Callable[[Request], Awaitable[Response]]:
    async def readyz(_: Request) -> Response:
        checks = await readiness.evaluate()
        ok = all(checks.values())
        body: dict[str, Any] = {"status": "ready" if ok else "not ready", "checks": checks}
        if readiness.details:
            body["details"] = readiness.details
        return JSONResponse(body, status_code=200 if ok else 503)

    return readyz


def ops_routes(readiness: Readiness) -> list[Route]:
    return [
        Route("/healthz", healthz),
        Route("/readyz", readyz_endpoint(readiness)),
        Route("/metrics", metrics),
    ]


class EmbeddedServer(uvicorn.Server):
    """uvicorn inside a service's own event loop: the service owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class OpsServer:
    """uvicorn serving the ops routes inside the service's event loop."""

    def __init__(self, readiness: Readiness, host: str, port: int) -> None:
        app = Starlette(routes=ops_routes(readiness))
        config = uvicorn.Config(
            app, host=host, port=port, log_config=None, access_log=False, lifespan="off"
        )
        self.server = EmbeddedServer(config)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.task.done():
                self.task.result()  # raises the bind error
            await asyncio.sleep(0.01)

    @property
    def port(self) -> int:
        sock = self.server.servers[0].sockets[0]
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task:
            await self.task
