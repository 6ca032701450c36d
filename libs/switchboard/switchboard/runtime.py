"""The common life of a service process: logging, tracing, the NATS connection and streams,
the ops server, the NATS health responder, and shutdown on SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from contextlib import AsyncExitStack
from types import TracebackType

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from . import bus
from .logs import setup_logging
from .ops import OpsServer, Readiness
from .settings import CommonSettings
from .telemetry import setup_telemetry

log = logging.getLogger(__name__)


class ServiceRuntime:
    """``async with ServiceRuntime("router", settings) as rt:`` gives ``rt.nc``, ``rt.js``,
    ``rt.subjects`` and ``rt.readiness``; leaving the block closes everything in reverse order."""

    def __init__(self, service: str, settings: CommonSettings, *, ops_server: bool = True) -> None:
        self.service = service
        self.settings = settings
        self.subjects = bus.Subjects(settings.subject_prefix)
        self.readiness = Readiness()
        self.stack = AsyncExitStack()
        self.ops_server = ops_server
        self.ops: OpsServer | None = None
        self._nc: NATS | None = None
        self._js: JetStreamContext | None = None
        self.stopping = asyncio.Event()

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
        return self.settings.instance or self.service

    async def __aenter__(self) -> ServiceRuntime:
        setup_logging(self.service, self.settings.log_level, self.settings.log_json)
        telemetry = setup_telemetry(self.service, self.settings)
        self.stack.callback(telemetry.shutdown)
        self._nc = await bus.connect(self.settings.nats_url, self.instance)
        self.stack.push_async_callback(self._close_nats)
        self._js = self._nc.jetstream()
        await bus.ensure_streams(self._js, self.subjects)
        self.readiness.add("nats", self._nats_ok)
        await self._nc.subscribe(
            self.subjects.health(self.service), queue="health", cb=self._answer_health
        )
        if self.ops_server:
            self.ops = OpsServer(self.readiness, self.settings.ops_host, self.settings.ops_port)
            await self.ops.start()
            self.stack.push_async_callback(self.ops.stop)
        self._install_signal_handlers()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stack.aclose()

    async def _close_nats(self) -> None:
        """Flush what was published, then close. Not drain(): in-flight work has already been
        waited for, and draining a pull subscription with a pending fetch can stall shutdown."""
        if self._nc is not None and not self._nc.is_closed:
            with contextlib.suppress(Exception):
                await self._nc.flush(timeout=2)
            await self._nc.close()

    async def _nats_ok(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    async def _answer_health(self, msg: Msg) -> None:
        checks = await self.readiness.evaluate()
        reply = {
            "service": self.service,
            "instance": self.instance,
            "ready": all(checks.values()),
            "checks": checks,
        }
        await msg.respond(json.dumps(reply).encode())

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.set)
        loop.add_signal_handler(signal.SIGUSR1, dump_tasks)

    async def wait_stopped(self) -> None:
        await self.stopping.wait()
        log.info("shutting down")


async def service_ready(
    nc: NATS, subjects: bus.Subjects, service: str, timeout: float = 1.0
) -> bool:
    """Ask any replica of ``service`` over NATS whether it is ready."""
    try:
        reply = await nc.request(subjects.health(service), b"", timeout=timeout)
    except Exception:
        return False
    return bool(json.loads(reply.data).get("ready"))


def dump_tasks() -> None:
    """SIGUSR1: log where every asyncio task of this process is waiting (for stuck-run triage)."""
    for task in asyncio.all_tasks():
        frames = task.get_stack(limit=12)
        where = " <- ".join(f"{f.f_code.co_name}:{f.f_lineno}" for f in reversed(frames))
        log.warning("task %s at %s", task.get_name(), where)
