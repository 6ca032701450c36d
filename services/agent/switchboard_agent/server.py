"""Agent runtime: consumes lanes, runs the model/tool loop, serves gRPC Sessions, Approvals and
ToolAccess."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid

from switchboard import bus, registry, rpc
from switchboard.media import MediaClient
from switchboard.runtime import ServiceRuntime
from switchboard.skills import SkillCatalog
from switchboard.v1 import approvals_pb2_grpc, messages_pb2, sessions_pb2_grpc

from .api.approvals import ApprovalsService, ToolAccessService
from .api.compaction_commands import CompactCommand
from .api.session_commands import SessionCommands
from .api.sessions import SessionsService
from .approvals.chat import ChatDecisions
from .approvals.notice import ApprovalNotices
from .approvals.store import ApprovalStore, ApprovalWaiter
from .approvals.toolgate import ToolGate
from .compaction.compactor import Compactor
from .config import AgentSettings
from .media.attachments import AgentMedia
from .media.image_tool import SPEC as IMAGE_SPEC
from .media.image_tool import ImageTool
from .memory.client import MemoryClient
from .memory.handle import AgentMemory
from .migrations import MIGRATIONS, SCHEMA
from .outbound.publisher import OutboundPublisher
from .plugins.hooks import Hooks
from .plugins.host import load_plugins
from .providers.failover_config import choose_router
from .reloading import AgentReload
from .runs.budget import Accounting
from .runs.lanes import LaneManager, LaneReader
from .runs.lease import Leases
from .runs.prompt import PromptBuilder
from .runs.runner import Runner
from .sessions.admin import SessionAdmin
from .sessions.compactions import CompactionStore
from .sessions.models import SessionModels
from .sessions.store import SessionStore
from .subagents.children import Subagents
from .subagents.session_tools import session_tools
from .tools.client import ToolDispatcher
from .tools.cron import CronTool
from .tools.local import LocalTools
from .tools.message import MessageTool
from .usage.store import UsageStore
from .workspace.files import WorkspaceFiles
from .workspace.skills import AgentSkills, SkillReadTool

log = logging.getLogger(__name__)


def _memory(settings: AgentSettings, rt: ServiceRuntime) -> AgentMemory | None:
    """The memory service's client, tools and sync (None: ``SB_MEMORY_ADDR`` is empty)."""
    if not settings.memory_addr:
        return None
    channel = rpc.channel(settings.memory_addr, settings.service_token.get_secret_value())
    rt.stack.push_async_callback(channel.close)
    memory = AgentMemory(
        MemoryClient(channel),
        settings.memory_scope,
        settings.workspace_root(),
        settings.memory_recall_k,
        settings.memory_sync,
        settings.memory_sync_quiet_ms / 1000,
    )
    memory.start()
    rt.stack.push_async_callback(memory.close)
    return memory


def _cron(
    settings: AgentSettings, rt: ServiceRuntime, outbound: OutboundPublisher
) -> list[CronTool]:
    """The ``cron`` tool on the scheduler's gRPC (none: ``SB_SCHEDULER_ADDR`` is empty)."""
    if not settings.scheduler_addr:
        return []
    channel = rpc.channel(settings.scheduler_addr, settings.service_token.get_secret_value())
    rt.stack.push_async_callback(channel.close)
    return [CronTool(channel, outbound)]


def _media(settings: AgentSettings, rt: ServiceRuntime) -> AgentMedia | None:
    """The media service's client (None: ``SB_MEDIA_ADDR`` is empty)."""
    if not settings.media_addr:
        return None
    channel = rpc.channel(settings.media_addr, settings.service_token.get_secret_value())
    rt.stack.push_async_callback(channel.close)
    return AgentMedia(MediaClient(channel), settings.image_max_edge)


async def serve(settings: AgentSettings, stop: asyncio.Event) -> None:
    async with ServiceRuntime(registry.get("agent"), settings, stop) as rt:
        # The provider's SDK loads (a third of a second) while the database connects; with
        # plugins enabled, once they are loaded (one may provide a model).
        choosing = (
            None
            if settings.plugins
            else asyncio.create_task(asyncio.to_thread(choose_router, settings, settings))
        )
        pool = await rt.database(SCHEMA, MIGRATIONS)
        store = SessionStore(pool)
        rules = settings.tool_rules()
        approvals = ApprovalStore(pool)
        waiter = ApprovalWaiter(rt.nc, rt.subjects, approvals)
        tools = ToolDispatcher(rt.nc, rt.js, rt.subjects, settings.tool_timeout_s)
        await tools.watch_changes()
        outbound = OutboundPublisher(rt.js, rt.subjects)
        memory = _memory(settings, rt)
        media = _media(settings, rt)
        # Skills: a skill's env requirements are checked against this process's environment.
        catalog = SkillCatalog(settings.skills_dirs, os.environ)
        skills = AgentSkills(catalog, settings.workspace_root(), settings.skill_max_chars)
        subagents = Subagents(rt.js, rt.subjects, pool, settings)
        own = [
            MessageTool(outbound, settings.message_targets, media.client if media else None),
            *(memory.tools() if memory else []),
            *_cron(settings, rt, outbound),
            SkillReadTool(skills),
            *session_tools(subagents, store, settings.session_visibility),
        ]
        hooks = Hooks(settings.hook_timeout_s)
        reserved = [t.spec.name for t in own] + ([IMAGE_SPEC.name] if media else [])
        plugins = await load_plugins(settings, hooks, reserved, settings.tool_timeout_s)
        if choosing is None:
            choosing = asyncio.create_task(
                asyncio.to_thread(choose_router, settings, settings, plugins.providers)
            )
        model, no_model_reply = await choosing
        if model is not None:
            plugins.note(model.unbuilt)  # a plugin's model whose factory failed
        rt.readiness.details["plugins"] = plugins.details()
        if media:
            own.append(ImageTool(media, model))
        local = LocalTools([*own, *plugins.tools])
        admin = SessionAdmin(pool, rt.nc, rt.subjects)
        models = SessionModels(
            settings,
            model,
            settings.model_choices,
            plugins.providers,
            timeout_s=settings.model_timeout_s,
        )
        accounting = Accounting(UsageStore(pool), settings.budget, settings.prices)
        rt.stack.push_async_callback(accounting.close)  # before the pool closes
        prompts = PromptBuilder(
            WorkspaceFiles(settings.workspace_root(), settings.bootstrap_max_chars),
            settings.timezone,
            settings.agent_timezones,
            skills.section,
        )
        compactor = Compactor(
            settings,
            CompactionStore(pool),
            rules,
            local,
            settings.memory_scope,
            settings.workspace_root(),
            prompts.zone,
            settings.max_tokens,
            accounting,
        )
        access = ToolAccessService(store, rules, tools, local)
        await rt.serve_grpc(
            settings.agent_grpc_host,
            settings.agent_grpc_port,
            rpc.Servicer(
                sessions_pb2_grpc.add_SessionsServicer_to_server,
                SessionsService(store, admin, models, UsageStore(pool), compactor, settings.budget),
            ),
            rpc.Servicer(
                approvals_pb2_grpc.add_ApprovalsServicer_to_server,
                ApprovalsService(approvals, waiter),
            ),
            rpc.Servicer(approvals_pb2_grpc.add_ToolAccessServicer_to_server, access),
        )

        gate = ToolGate(rules, approvals, waiter, settings.approval_timeout_s)
        gate.announce = ApprovalNotices(outbound, approvals)
        gate.hooks = hooks
        # "/approve <id>" in a chat: the router asks, any replica answers.
        await ChatDecisions(approvals, waiter).subscribe(rt.nc, rt.subjects)
        # "/new", "/reset", "/stop", "/status", "/model", "/compact" in a chat: the router asks.
        compact = CompactCommand(compactor, models, rt.nc, rt.subjects)
        rt.stack.push_async_callback(compact.close)
        await SessionCommands(admin, models, settings.queue_mode, compact).subscribe(
            rt.nc, rt.subjects
        )
        runner = Runner(
            rt.nc,
            rt.subjects,
            store,
            tools,
            model,
            no_model_reply,
            settings.workspace_root(),
            settings.max_iterations,
            settings.max_tokens,
            gate,
            outbound,
            local,
            memory,
            media,
            prompts,
            models,
            accounting,
            hooks,
            compactor,
        )
        runner.after_commit = subagents.committed
        ruled = (gate, access, compactor)  # every holder of the tool rules
        rt.on_reload(AgentReload(runner, models, accounting, plugins.providers, ruled))
        lease_kv = await rt.js.key_value(rt.subjects.lease_bucket)
        leases = Leases(
            lease_kv,
            f"{rt.instance}-{uuid.uuid4().hex[:8]}",
            await bus.bucket_ttl(lease_kv, bus.LEASE_TTL_S),  # the bucket's TTL decides
        )
        lanes = LaneManager(
            rt.nc,
            LaneReader(rt.js, rt.subjects.stream("LANES")),
            leases,
            store,
            runner,
            default_mode=settings.queue_mode,
            collect_debounce_s=settings.collect_debounce_ms / 1000,
            keepalive_s=settings.lane_ack_wait_s / 3,
        )
        worker = await rt.consume(
            "LANES",
            "dispatch",
            rt.subjects.lanes(),
            messages_pb2.LaneItem,
            lanes.handle,
            concurrency=settings.agent_max_concurrent_runs,
            ack_wait=settings.lane_ack_wait_s,
        )
        await lanes.running.listen(rt.nc, rt.subjects)
        lanes.saturated = lambda: worker.saturated
        gate.while_waiting = worker.lend_slot
        subagents.lend = worker.lend_slot
        log.info("agent ready")
        await rt.wait_stopped()
