"""Scheduler: serves gRPC ``Scheduler`` and fires due jobs (any number of replicas share them:
:mod:`.firing`) as system events on INBOUND, webhooks and watchers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from switchboard import registry, rpc
from switchboard.net.fetch import Fetcher, FetchLimits
from switchboard.net.ssrf import SsrfGuard
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import scheduler_pb2_grpc

from .actions import Actions
from .config import SchedulerSettings
from .firing import Firing, finish
from .migrations import MIGRATIONS, SCHEMA
from .service import SchedulerService
from .store import JobStore

log = logging.getLogger(__name__)
USER_AGENT = "Switchboard-Scheduler/1.0 (self-hosted assistant)"


def fetcher(settings: SchedulerSettings) -> Fetcher:
    """Webhooks and URL watchers: through the SSRF guard, capped."""
    timeout = settings.scheduler_fetch_timeout_s
    return Fetcher(
        SsrfGuard(settings.scheduler_fetch_allow_cidrs),
        FetchLimits(
            max_bytes=settings.scheduler_fetch_max_bytes,
            max_redirects=5,
            connect_timeout_s=min(10.0, timeout),
            read_timeout_s=timeout,
        ),
        user_agent=USER_AGENT,
        accept="*/*",
    )


def reloader(firing: Firing) -> Callable[[SchedulerSettings], Awaitable[None]]:
    """The scheduler's hook for a changed configuration file (configfile.reload.RELOADABLE):
    the quiet hours. Firing reads them at each job, so a job due from now on obeys them."""

    async def reload(new: SchedulerSettings) -> None:
        firing.quiet = new.quiet_hours
        log.info("quiet hours reloaded", extra={"quiet_hours": sorted(new.quiet_hours)})

    return reload


async def serve(settings: SchedulerSettings, stop: asyncio.Event) -> None:
    async with ServiceRuntime(registry.get("scheduler"), settings, stop) as rt:
        pool = await rt.database(SCHEMA, MIGRATIONS)
        store = JobStore(pool)
        actions = Actions(
            rt.js,
            rt.subjects,
            fetcher(settings),
            settings.workspace_root(),
            settings.scheduler_fetch_max_bytes,
        )
        firing = Firing(
            store,
            actions,
            settings.quiet_hours,
            batch=settings.scheduler_batch,
            concurrency=settings.scheduler_concurrency,
            grace_s=settings.scheduler_misfire_grace_s,
            poll_s=settings.scheduler_poll_s,
        )
        service = SchedulerService(
            store,
            firing,
            settings.default_agent,
            int(settings.scheduler_min_interval_s * 1000),
            settings.scheduler_misfire_grace_s,
        )
        await rt.serve_grpc(
            settings.scheduler_grpc_host,
            settings.scheduler_grpc_port,
            rpc.Servicer(scheduler_pb2_grpc.add_SchedulerServicer_to_server, service),
        )
        rt.on_reload(reloader(firing))
        loop = asyncio.create_task(firing.run(rt.stopping), name="scheduler-firing")
        rt.stack.push_async_callback(finish, loop)
        log.info("scheduler ready", extra={"quiet_hours": sorted(settings.quiet_hours)})
        await rt.wait_stopped()
