"""The skeleton of every service: its tracing, the NATS connection and streams, the ops server
and the NATS health responder; on request its database (schema and migrations), its gRPC server
(with health, reflection and interceptors) and its stream consumers (pull worker, backlog
gauge, drain on shutdown). A service's ``serve()`` is then a list of what it is made of::

    async with ServiceRuntime(registry.get("router"), settings, stop) as rt:
        await rt.consume("INBOUND", "router", "sb.inbound.>", InboundMessage, router.handle,
                         concurrency=settings.concurrency)
        await rt.wait_stopped()

Leaving the block stops it in reverse order: consumers stop fetching and drain their in-flight
work, gRPC reports NOT_SERVING and stops, then the database, the ops server, NATS, tracing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import TracebackType
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

import asyncpg
from google.protobuf.message import Message
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from . import backlog, bus, natsauth, reloads, rpc, tokens
from .errors import ConfigError, DependencyUnavailable, SwitchboardError
from .host import serving
from .ops import OpsServer, Readiness
from .registry import Service
from .settings import CommonSettings, DatabaseSettings, RpcSettings
from .store import Migration, create_pool, migrate
from .telemetry import enter_service, setup_telemetry

log = logging.getLogger(__name__)
# How often a service that is not the streams' owner looks for them while it starts, for how
# long (then bus.wait_streams' 0.2 s): that 0.2 s added up to itself to a one-process start-up
# (docs/startup.md).
STREAMS_POLL_S = 0.02
STREAMS_FAST_S = 0.5
PG_SOCKET_POLL_S = 0.02  # see socket_appears
PG_SOCKET_WAIT_S = 60.0  # as store.create_pool's own wait


def _version() -> str:
    """The installed switchboard package's version (every service ships with it)."""
    try:
        return version("switchboard")
    except PackageNotFoundError:  # running from a source tree without an install
        return "unknown"


VERSION = _version()  # in every health answer
M = TypeVar("M", bound=Message)
T = TypeVar("T")


class Stopped(SwitchboardError):
    """The service was told to stop before it had started."""


class ServiceRuntime:
    """``async with ServiceRuntime(service, settings, stop) as rt:`` gives ``rt.nc``, ``rt.js``,
    ``rt.subjects`` and ``rt.readiness``. ``stop`` is the event that ends the service (set by
    the process's signal handlers, see :mod:`switchboard.host`)."""

    def __init__(self, service: Service, settings: CommonSettings, stop: asyncio.Event) -> None:
        self.service = service
        self.name = service.name
        self.settings = settings
        self.subjects = bus.Subjects(settings.subject_prefix)
        self.readiness = Readiness()
        self.stack = AsyncExitStack()
        self.ops: OpsServer | None = None
        self.stopping = stop
        self._nc: NATS | None = None
        self._js: JetStreamContext | None = None
        self._serving = False  # the service set up everything it is made of

    @property
    def nc(self) -> NATS:
        assert self._nc is not None, "runtime not started"
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        assert self._js is not None, "runtime not started"
        return self._js

    @property
    def instance(self) -> str:
        return self.settings.instance or self.name

    async def __aenter__(self) -> ServiceRuntime:
        enter_service(self.name)
        name = self.settings.otel_service_name or self.service.otel_name
        telemetry = setup_telemetry(self.name, name, self.settings)
        self.stack.callback(telemetry.shutdown)
        try:
            await self._connect()
        except BaseException:
            await self.stack.aclose()
            raise
        return self

    async def _connect(self) -> None:
        settings = self.settings
        login = bus.Login(
            settings.nats_user,
            settings.nats_password.get_secret_value(),
            str(settings.nats_tls_ca) if settings.nats_tls_ca else None,
        )
        self._nc = await bus.connect(settings.nats_url, self.instance, login)
        self.stack.push_async_callback(self._close_nats)
        self._js = self._nc.jetstream()
        if settings.nats_user in ("", natsauth.ADMIN, natsauth.STREAM_OWNER):
            await bus.ensure_streams(self._js, self.subjects, settings.nats_replicas)
        else:  # only the stream owner may create them
            await self.unless_stopped(self._wait_streams(), "waiting for the NATS streams")
        self.readiness.add("nats", self._nats_ok)
        self.readiness.add("started", self._started)
        await self._nc.subscribe(
            self.subjects.health(self.name), queue="health", cb=self._answer_health
        )
        await self._nc.subscribe(  # every replica answers here (GET /api/health)
            self.subjects.health_replicas(self.name), cb=self._answer_health
        )
        if self.service.port("ops") is not None:
            self.ops = OpsServer(self.readiness, self.settings.ops_host, self.settings.ops_port)
            await self.ops.start()
            self.stack.push_async_callback(self.ops.stop)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stack.aclose()

    # --- what a service may be made of ------------------------------------------------------

    async def database(self, schema: str, migrations: Sequence[Migration]) -> asyncpg.Pool:
        """A pool on ``SB_DATABASE_URL`` with ``schema`` migrated; ready once it answers."""
        if not isinstance(self.settings, DatabaseSettings):
            raise ConfigError(f"{type(self.settings).__name__} has no database settings")
        pools: list[asyncpg.Pool] = []

        async def postgres_ok() -> bool:
            return bool(pools) and await pools[0].fetchval("SELECT 1") == 1

        self.readiness.add("postgres", postgres_ok)
        dsn = self.settings.database_url.get_secret_value()
        if (socket := unix_socket(dsn)) is not None:
            await self.unless_stopped(socket_appears(socket), "waiting for PostgreSQL")
        pool = await self.unless_stopped(
            create_pool(dsn, max_size=self.settings.database_pool_max),
            "waiting for PostgreSQL",
        )
        self.stack.push_async_callback(pool.close)
        await migrate(pool, schema, migrations)
        pools.append(pool)
        return pool

    async def serve_grpc(self, host: str, port: int, *servicers: rpc.Servicer) -> rpc.GrpcServer:
        """Serve ``servicers`` (with health and reflection) on ``host:port``; SERVING at once,
        NOT_SERVING and stopped (with a grace period) when the service stops."""
        settings = self.settings
        token = (
            settings.service_token.get_secret_value() if isinstance(settings, RpcSettings) else ""
        )
        if not token:
            raise ConfigError(
                f"{self.name} serves gRPC and needs SB_SERVICE_TOKEN, the credential its callers "
                "send (embedded mode generates it; Compose and Kubernetes take it from a secret)"
            )
        if why := tokens.weakness(token):
            raise ConfigError(f"SB_SERVICE_TOKEN is weak: {why}; `switchboard secrets` makes one")
        server = rpc.GrpcServer(servicers, token=token)
        server.bind(host, port)
        await server.start()
        await server.set_serving(True)

        async def stop() -> None:
            await server.set_serving(False)
            await server.stop()

        self.stack.push_async_callback(stop)
        return server

    async def consume(
        self,
        stream: str,
        durable: str,
        subjects: str,
        payload: type[M],
        handler: Callable[[Msg, M], Awaitable[None]],
        *,
        concurrency: int,
        ack_wait: float = 30.0,
        max_deliver: int = -1,
        track_backlog: bool = True,
    ) -> bus.PullWorker:
        """Pull ``subjects`` of ``stream`` through the durable consumer ``durable`` (shared by
        the replicas), at most ``concurrency`` messages at a time, each decoded as ``payload``
        for ``handler``; with ``track_backlog`` its backlog is exported as a gauge."""
        stream_name = self.subjects.stream(stream)
        sub = await bus.durable_pull(
            self.js, stream_name, durable, subjects, ack_wait=ack_wait, max_deliver=max_deliver
        )
        worker = bus.PullWorker(
            sub, bus.decoding(payload, handler, durable), concurrency, name=durable
        )
        tasks = [asyncio.create_task(worker.run(), name=f"{durable}-fetch")]
        if track_backlog:
            tasks.append(asyncio.create_task(backlog.track(self.js, stream_name, durable)))

        async def stop() -> None:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await worker.drain()

        self.stack.push_async_callback(stop)
        return worker

    def on_reload(self, hook: reloads.Hook) -> None:
        """Call ``hook`` with new settings (of this service's class) when reloadable ones
        change in the configuration file (:mod:`switchboard.reloads`), until it stops."""
        unregister = reloads.register(self.name, type(self.settings), hook)
        if unregister is not None:
            self.stack.callback(unregister)

    async def unless_stopped(self, work: Awaitable[T], what: str) -> T:
        """``work`` (a wait of the start-up, such as for a database that is not up yet),
        abandoned with :class:`Stopped` if the service is told to stop meanwhile."""
        task = asyncio.ensure_future(work)
        stopped = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise Stopped(f"{self.name} was told to stop while {what}")

    async def wait_stopped(self) -> None:
        """The service is made: it counts as started (ready, if its checks pass) until stopped."""
        self._serving = True
        try:
            with serving():
                await self.stopping.wait()
        finally:
            self._serving = False
        log.info("shutting down")

    # --- internals --------------------------------------------------------------------------

    async def _close_nats(self) -> None:
        """Flush what was published, then close. Not drain(): in-flight work has already been
        waited for, and draining a pull subscription with a pending fetch can stall shutdown."""
        if self._nc is not None and not self._nc.is_closed:
            with contextlib.suppress(Exception):
                await self._nc.flush(timeout=2)
            await self._nc.close()

    async def _wait_streams(self) -> None:
        """Until the streams' owner has made them: every ``STREAMS_POLL_S`` at first (in one
        process it makes them within milliseconds of the others' start), then at
        bus.wait_streams' own pace (service processes: the owner may still be importing, and
        each look is a request per stream, taken from the start-up of every process)."""
        try:
            await asyncio.wait_for(
                bus.wait_streams(self.js, self.subjects, STREAMS_POLL_S), STREAMS_FAST_S
            )
        except TimeoutError:
            await bus.wait_streams(self.js, self.subjects)

    async def _started(self) -> bool:
        return self._serving

    async def _nats_ok(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    async def _answer_health(self, msg: Msg) -> None:
        checks = await self.readiness.evaluate()
        reply = {
            "service": self.name,
            "instance": self.instance,
            "ready": all(checks.values()),
            "checks": checks,
            "version": VERSION,
        }
        await msg.respond(json.dumps(reply).encode())


def unix_socket(dsn: str) -> Path | None:
    """The unix socket a PostgreSQL URI connects to (``?host=/a/dir``), None for TCP."""
    parts = urlsplit(dsn)
    query = parse_qs(parts.query)
    host = (query.get("host") or [parts.hostname or ""])[0]
    if not host.startswith("/"):
        return None
    try:
        port = int((query.get("port") or [str(parts.port or 5432)])[0])
    except ValueError:
        return None
    return Path(host) / f".s.PGSQL.{port}"


async def socket_appears(path: Path) -> None:
    """Return once PostgreSQL's socket ``path`` exists (the server listens), or at once when
    its directory does not exist (nothing to wait for there), or after ``PG_SOCKET_WAIT_S``.
    Embedded mode starts PostgreSQL while the services start: store.create_pool retries with a
    doubling delay (0.1 s up to 2 s), so a first connection attempt made too early added up to
    the last delay to the start-up; watching the file is free (docs/startup.md)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PG_SOCKET_WAIT_S
    while loop.time() < deadline:
        if not _socket_missing(path):
            return
        await asyncio.sleep(PG_SOCKET_POLL_S)  # no event to wait for: another process's file


def _socket_missing(path: Path) -> bool:
    """Not there yet, in a directory that is (two stat calls of a local path)."""
    return not path.exists() and path.parent.is_dir()


async def service_ready(
    nc: NATS, subjects: bus.Subjects, service: str, timeout: float = 1.0
) -> bool:
    """Ask any replica of ``service`` over NATS whether it is ready; raises with the reason
    when it is not (no replica answers, or the checks that fail), for the readiness log."""
    reply = json.loads((await nc.request(subjects.health(service), b"", timeout=timeout)).data)
    failing = [name for name, ok in reply.get("checks", {}).items() if not ok]
    if not reply.get("ready"):
        raise DependencyUnavailable(f"{reply.get('instance', service)} fails {failing}")
    return True
