"""gRPC Sessions service: sessions and transcripts (List, History), their settings (Patch),
and Reset, Delete, Abort (what they mean for the lane: :mod:`session_admin`), Compact
(:mod:`compaction`)."""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

import grpc

from switchboard.errors import InvalidSessionKey
from switchboard.queue_modes import QueueMode
from switchboard.sessions import parse_session_key, validate_session_key
from switchboard.v1 import sessions_pb2, sessions_pb2_grpc

from .compaction import Compactor
from .policy import PolicyError, ToolPolicy
from .session_admin import SessionAdmin
from .session_models import ModelChoiceError, SessionModels
from .store import SessionStore
from .usage import Totals, UsageStore

DEFAULT_MODE = "default"  # Patch: drop the session's override


def epoch_ms(dt: datetime | None) -> int:
    """Milliseconds since the epoch for the protobuf ``*_ms`` fields; 0 for no time."""
    return int(dt.timestamp() * 1000) if dt else 0


async def _valid_key(key: str, context: grpc.aio.ServicerContext) -> str:
    """The key, or the call aborted with INVALID_ARGUMENT and the reason."""
    try:
        return validate_session_key(key)
    except InvalidSessionKey as exc:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        raise  # abort() raises; this keeps the type checker informed


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
    ) -> None:
        self.store = store
        self.admin = admin
        self.models = models
        self.usage = usage or UsageStore(store.pool)
        self.compactor = compactor

    async def _admin(self, context: grpc.aio.ServicerContext) -> SessionAdmin:
        if self.admin is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not available on this server")
        assert self.admin is not None
        return self.admin

    async def Reset(
        self, request: sessions_pb2.ResetSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.ResetSessionResponse:
        key = await _valid_key(request.session_key, context)
        removed = await (await self._admin(context)).reset(key)
        if removed is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"there is no session {key!r}")
        return sessions_pb2.ResetSessionResponse(session_key=key, messages_removed=removed or 0)

    async def Delete(
        self, request: sessions_pb2.DeleteSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.DeleteSessionResponse:
        key = await _valid_key(request.session_key, context)
        removed = await (await self._admin(context)).delete(key, request.requested_by[:200])
        if removed is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"there is no session {key!r}")
        return sessions_pb2.DeleteSessionResponse(session_key=key, messages_removed=removed or 0)

    async def Abort(
        self, request: sessions_pb2.AbortSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.AbortSessionResponse:
        key = await _valid_key(request.session_key, context)
        by = request.requested_by[:200] or "api"
        aborted = await (await self._admin(context)).abort(key, by)
        return sessions_pb2.AbortSessionResponse(session_key=key, aborted=aborted)

    async def Compact(
        self, request: sessions_pb2.CompactSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.CompactSessionResponse:
        key = await _valid_key(request.session_key, context)
        if not 0 <= request.keep_turns <= 100:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "keep_turns must be 0-100")
        admin = await self._admin(context)
        if self.compactor is None or self.models is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not available on this server")
        assert self.compactor is not None and self.models is not None
        done = await self.compactor.compact_now(
            key, request.keep_turns, self.models, admin.nc, admin.subjects
        )
        if done is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"there is no session {key!r}")
        assert done is not None
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

    async def Usage(
        self, request: sessions_pb2.UsageRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.UsageResponse:
        day: date | None = None
        if request.day:
            try:
                day = date.fromisoformat(request.day)
            except ValueError:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, "day must be a date like 2026-01-31 (UTC)"
                )
        key = await _valid_key(request.session_key, context) if request.session_key else ""
        total, rows = await self.usage.report(request.agent, day, key, request.run_id)
        return sessions_pb2.UsageResponse(
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

    async def History(
        self, request: sessions_pb2.HistoryRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.HistoryResponse:
        key = await _valid_key(request.session_key, context)
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

    async def Patch(
        self, request: sessions_pb2.PatchSessionRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.PatchSessionResponse:
        key = await _valid_key(request.session_key, context)
        mode = request.queue_mode
        if mode and mode != DEFAULT_MODE and not QueueMode.is_mode(mode):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"queue_mode must be one of {QueueMode.names()} or '{DEFAULT_MODE}'",
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
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid tool policy: {exc}")
        model = request.model.strip()
        if model and model != DEFAULT_MODE:
            model = await self._checked_model(model, context)
        if mode:
            mode = await self.store.set_queue_mode(key, agent, "" if mode == DEFAULT_MODE else mode)
        if policy_json:
            await self.store.set_tool_policy(key, agent, policy)
        if model:
            admin = await self._admin(context)
            await admin.set_model(key, agent, "" if model == DEFAULT_MODE else model)
        state = await self.store.lane_state(key)
        return sessions_pb2.PatchSessionResponse(
            session_key=key,
            queue_mode=state.queue_mode,
            tool_policy_json=json.dumps(state.tool_policy),
            model=state.model,
        )

    async def _checked_model(self, ref: str, context: grpc.aio.ServicerContext) -> str:
        if self.models is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no model is configured")
        assert self.models is not None
        try:
            return self.models.check(ref)
        except ModelChoiceError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise

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
