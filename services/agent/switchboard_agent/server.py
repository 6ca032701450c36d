"""Agent runtime: consumes lanes, runs the model/tool loop, serves gRPC Sessions."""

from __future__ import annotations

import asyncio
import logging
import uuid

import asyncpg

from switchboard import backlog, bus
from switchboard.rpc import GrpcServer
from switchboard.runtime import ServiceRuntime
from switchboard.store import create_pool, migrate
from switchboard.v1 import approvals_pb2_grpc, sessions_pb2_grpc

from .approvals import ApprovalStore, ApprovalWaiter
from .approvals_api import ApprovalsService, ToolAccessService
from .config import AgentSettings
from .lanes import LaneManager, LaneReader
from .lease import Leases
from .migrations import MIGRATIONS, SCHEMA
from .outbound import OutboundPublisher
from .providers.base import Model
from .providers.select import NO_MODEL_MESSAGE, build_model, resolve_model_config
from .runner import Runner
from .sessions_api import SessionsService
from .store import SessionStore
from .toolgate import ToolGate
from .tools_client import ToolDispatcher

log = logging.getLogger(__name__)
LANE_ACK_WAIT_S = 15.0


def choose_model(settings: AgentSettings) -> tuple[Model | None, str]:
    """The configured model, or None and the reply that explains how to configure one."""
    try:
        config = resolve_model_config(
            settings.model or None,
            settings.anthropic_api_key or None,
            settings.anthropic_base_url or None,
            settings.openai_api_key or None,
            settings.openai_base_url or None,
        )
    except ValueError as exc:
        log.error("invalid model configuration: %s", exc)
        return None, f"The model configuration is invalid: {exc}\n\n{NO_MODEL_MESSAGE}"
    if config is None:
        log.warning("no model configured; every reply will say how to configure one")
        return None, NO_MODEL_MESSAGE
    log.info("model configured", extra={"provider": config.provider, "model": config.model})
    return build_model(config), NO_MODEL_MESSAGE


async def serve(settings: AgentSettings) -> None:
    async with ServiceRuntime("agent", settings) as rt:
        pool_holder: list[asyncpg.Pool] = []

        async def postgres_ok() -> bool:
            return bool(pool_holder) and await pool_holder[0].fetchval("SELECT 1") == 1

        rt.readiness.add("postgres", postgres_ok)
        pool = await create_pool(settings.database_url, max_size=settings.database_pool_max)
        rt.stack.push_async_callback(pool.close)
        await migrate(pool, SCHEMA, MIGRATIONS)
        pool_holder.append(pool)
        store = SessionStore(pool)

        rules = settings.tool_rules()
        approvals = ApprovalStore(pool)
        waiter = ApprovalWaiter(rt.nc, rt.subjects, approvals)
        dispatcher = ToolDispatcher(rt.nc, rt.js, rt.subjects, settings.tool_timeout_s)
        grpc_server = GrpcServer(
            ["switchboard.v1.Sessions", "switchboard.v1.Approvals", "switchboard.v1.ToolAccess"]
        )
        sessions_pb2_grpc.add_SessionsServicer_to_server(SessionsService(store), grpc_server.server)
        approvals_pb2_grpc.add_ApprovalsServicer_to_server(
            ApprovalsService(approvals, waiter), grpc_server.server
        )
        approvals_pb2_grpc.add_ToolAccessServicer_to_server(
            ToolAccessService(store, rules, dispatcher), grpc_server.server
        )
        port = grpc_server.bind(settings.agent_grpc_host, settings.agent_grpc_port)
        await grpc_server.start()
        await grpc_server.set_serving(True)
        rt.stack.push_async_callback(grpc_server.stop)

        model, no_model_reply = choose_model(settings)
        gate = ToolGate(rules, approvals, waiter, settings.approval_timeout_s)
        runner = Runner(
            rt.nc,
            rt.subjects,
            store,
            dispatcher,
            model,
            no_model_reply,
            settings.workspace_root(),
            settings.max_iterations,
            settings.max_tokens,
            gate,
            OutboundPublisher(rt.js, rt.subjects),
        )
        kv = await rt.js.key_value(rt.subjects.lease_bucket)
        owner = f"{rt.instance}-{uuid.uuid4().hex[:8]}"
        lanes = LaneManager(
            rt.nc,
            LaneReader(rt.js, rt.subjects.stream("LANES")),
            Leases(kv, owner, bus.LEASE_TTL_S),
            store,
            runner,
            default_mode=settings.queue_mode,
            collect_debounce_s=settings.collect_debounce_ms / 1000,
            keepalive_s=LANE_ACK_WAIT_S / 3,
        )
        sub = await bus.durable_pull(
            rt.js,
            rt.subjects.stream("LANES"),
            "dispatch",
            rt.subjects.lanes(),
            ack_wait=LANE_ACK_WAIT_S,
            max_deliver=-1,
        )
        worker = bus.PullWorker(sub, lanes.handle, settings.agent_max_concurrent_runs, "agent")
        lanes.saturated = lambda: worker.saturated
        gate.while_waiting = worker.lend_slot
        task = asyncio.create_task(worker.run())
        lanes_stream = rt.subjects.stream("LANES")
        tracking = asyncio.create_task(backlog.track(rt.js, lanes_stream, "dispatch"))
        log.info("agent ready", extra={"grpc_port": port})
        await rt.wait_stopped()
        task.cancel()
        tracking.cancel()
        await grpc_server.set_serving(False)
        await worker.drain()


def main() -> None:
    asyncio.run(serve(AgentSettings()))
