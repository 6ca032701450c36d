"""gRPC Sessions service: sessions and transcripts (List, History), their settings (Patch),
and Reset, Delete, Abort (what they mean for the lane: :mod:`..sessions.admin`), Compact
(:mod:`..compaction.compactor`). Refusals are kinds of :mod:`switchboard.errors` (INVALID_ARGUMENT,
NOT_FOUND...), turned into statuses with their text by :func:`.grpc_errors`."""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

import grpc

from switchboard.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unimplemented,
)
from switchboard.errors_map import grpc_errors
from switchboard.queue_modes import QueueMode
from switchboard.sessions import parse_session_key, validate_session_key
from switchboard.v1 import sessions_pb2, sessions_pb2_grpc

from ..compaction.compactor import Compactor
from ..runs.budget import Budget
from ..sessions.admin import SessionAdmin
from ..sessions.models import ModelChoiceError, SessionModels
from ..sessions.store import SessionStore
from ..tools.policy import PolicyError, ToolPolicy
from ..usage.store import Totals, UsageStore

DEFAULT_MODE = "default"  # Patch: drop the session's override
NOT_HERE = "not available on this server"
statuses = grpc_errors("the agent failed")


def epoch_ms(dt: datetime | None) -> int:
    """Milliseconds since the epoch for the protobuf ``*_ms`` fields; 0 for no time."""
    return int(dt.timestamp() * 1000) if dt else 0


def usage_totals(t: Totals) -> sessions_pb2.UsageTotals:
    return sessions_pb2.UsageTotals(
        input_tokens=t.input_tokens,
        output_tokens=t.output_tokens,
        cost_usd=t.cost_usd,
        calls=t.calls,
    )


class SessionsService(sessions_pb2_grpc.SessionsServicer):
    def __init__(
        self,
        store: SessionStore,
        admin: SessionAdmin | None = None,
        models: SessionModels | None = None,
        usage: UsageStore | None = None,
        compactor: Compactor | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.store = store
        self.budget = budget  # SB_BUDGET: Usage answers it beside the usage
        self.admin = admin
        self.models = models
        self.usage = usage or UsageStore(store.pool)
        self.compactor = compactor

    def _admin(self) -> SessionAdmin:
        if self.admin is None:
            raise Unimplemented(NOT_HERE)
        return self.admin

    @statuses
    async def Reset(
        self, request: sessions_pb2.ResetSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.ResetSessionResponse:
        key = validate_session_key(request.session_key)
        removed = await self._admin().reset(key)
        if removed is None:
            raise NotFound(f"there is no session {key!r}")
        return sessions_pb2.ResetSessionResponse(session_key=key, messages_removed=removed or 0)

    @statuses
    async def Delete(
        self, request: sessions_pb2.DeleteSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.DeleteSessionResponse:
        key = validate_session_key(request.session_key)
        removed = await self._admin().delete(key, request.requested_by[:200])
        if removed is None:
            raise NotFound(f"there is no session {key!r}")
        return sessions_pb2.DeleteSessionResponse(session_key=key, messages_removed=removed or 0)

    @statuses
    async def Abort(
        self, request: sessions_pb2.AbortSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.AbortSessionResponse:
        key = validate_session_key(request.session_key)
        by = request.requested_by[:200] or "api"
        aborted = await self._admin().abort(key, by)
        return sessions_pb2.AbortSessionResponse(session_key=key, aborted=aborted)

    @statuses
    async def Compact(
        self, request: sessions_pb2.CompactSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.CompactSessionResponse:
        key = validate_session_key(request.session_key)
        if not 0 <= request.keep_turns <= 100:
            raise InvalidArgument("keep_turns must be 0-100")
        admin = self._admin()
        if self.compactor is None or self.models is None:
            raise Unimplemented(NOT_HERE)
        done = await self.compactor.compact_now(
            key, request.keep_turns, self.models, admin.nc, admin.subjects
        )
        if done is None:
            raise NotFound(f"there is no session {key!r}")
        return sessions_pb2.CompactSessionResponse(
            session_key=key,
            compacted=done.compacted,
            note=done.note,
            messages_compacted=done.messages,
            summary=done.summary,
            facts_flushed=done.flush.stored,
            flushed_to=done.flush.to,
            tokens_before=done.tokens_before,
            tokens_after=done.tokens_after,
        )

    @statuses
    async def Usage(
        self, request: sessions_pb2.UsageRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.UsageResponse:
        day: date | None = None
        if request.day:
            try:
                day = date.fromisoformat(request.day)
            except ValueError as exc:
                raise InvalidArgument("day must be a date like 2026-01-31 (UTC)") from exc
        key = validate_session_key(request.session_key) if request.session_key else ""
        total, rows = await self.usage.report(request.agent, day, key, request.run_id)
        return sessions_pb2.UsageResponse(
            budget_json=self.budget.model_dump_json(exclude_defaults=True) if self.budget else "",
            total=usage_totals(total),
            rows=[
                sessions_pb2.UsageRow(
                    agent=r.agent,
                    day=r.day.isoformat(),
                    model=r.model,
                    totals=usage_totals(r.totals),
                )
                for r in rows
            ],
        )

    @statuses
    async def History(
        self, request: sessions_pb2.HistoryRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.HistoryResponse:
        key = validate_session_key(request.session_key)
        rows = await self.store.history(key, max(0, request.limit))
        return sessions_pb2.HistoryResponse(
            session_key=key,
            messages=[
                sessions_pb2.TranscriptMessage(
                    role=r.role,
                    content_json=json.dumps(r.content),
                    run_id=r.run_id,
                    created_at_ms=epoch_ms(r.created_at),
                )
                for r in rows
            ],
        )

    @statuses
    async def Patch(
        self, request: sessions_pb2.PatchSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.PatchSessionResponse:
        key = validate_session_key(request.session_key)
        mode = request.queue_mode
        if mode and mode != DEFAULT_MODE and not QueueMode.is_mode(mode):
            raise InvalidArgument(
                f"queue_mode must be one of {QueueMode.names()} or '{DEFAULT_MODE}'"
            )
        agent = parse_session_key(key).root.agent or "main"
        policy_json = request.tool_policy_json
        policy: dict[str, Any] | None = None
        if policy_json:
            try:
                data = json.loads(policy_json)
                if data is not None:
                    ToolPolicy.from_config(data, "tool_policy")
                    policy = data
            except (ValueError, PolicyError) as exc:
                raise InvalidArgument(f"invalid tool policy: {exc}") from exc
        model = request.model.strip()
        if model and model != DEFAULT_MODE:
            model = self._checked_model(model)
        if mode:
            mode = await self.store.set_queue_mode(key, agent, "" if mode == DEFAULT_MODE else mode)
        if policy_json:
            await self.store.set_tool_policy(key, agent, policy)
        if model:
            await self._admin().set_model(key, agent, "" if model == DEFAULT_MODE else model)
        state = await self.store.lane_state(key)
        return sessions_pb2.PatchSessionResponse(
            session_key=key,
            queue_mode=state.queue_mode,
            tool_policy_json=json.dumps(state.tool_policy),
            model=state.model,
        )

    def _checked_model(self, ref: str) -> str:
        if self.models is None:
            raise FailedPrecondition("no model is configured")
        try:
            return self.models.check(ref)
        except ModelChoiceError as exc:
            raise InvalidArgument(str(exc)) from exc

    @statuses
    async def List(
        self, request: sessions_pb2.ListSessionsRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.ListSessionsResponse:
        limit = request.limit if 0 < request.limit <= 1000 else 100
        rows = await self.store.list_sessions(request.agent, limit)
        used = await self.usage.by_session([r.session_key for r in rows])
        return sessions_pb2.ListSessionsResponse(
            sessions=[
                sessions_pb2.SessionInfo(
                    session_key=r.session_key,
                    agent=r.agent,
                    updated_at_ms=epoch_ms(r.updated_at),
                    message_count=r.message_count,
                    usage=usage_totals(used.get(r.session_key, Totals())),
                )
                for r in rows
            ]
        )
