"""The tool phase of a turn: policy and approvals (:mod:`..approvals.toolgate`), then the executors,
or the agent itself for its local tools (:mod:`..tools.local`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from ..approvals.toolgate import ToolGate
from ..metrics import TOOL_CALLS
from ..plugins.hooks import RunInfo
from ..providers.base import TRANSCRIPT_ONLY
from ..sessions.store import Message
from ..tools.client import CallRequest, CallResult, OnUpdate, ToolDispatcher
from ..tools.local import LocalContext, LocalTools
from .turn import Turn, checkpoint_state


async def run_tools(
    gate: ToolGate,
    tools: ToolDispatcher,
    turn: Turn,
    uses: list[dict[str, Any]],
    local: LocalTools | None = None,
) -> Message:
    """One turn's tool calls: start events, the gate (policy, approvals), the executors (or
    the agent itself, for its local tools), result events; the tool_result message for the
    transcript."""
    record, events = turn.record, turn.events
    calls = [CallRequest(u["id"], u["name"], u.get("input") or {}) for u in uses]
    for c in calls:
        if not turn.resumed:
            await events.emit(
                "tool", "start", tool=c.name, call_id=c.call_id, data={"args": c.args}
            )

    async def emit(phase: str, call: CallRequest, data: dict[str, Any]) -> None:
        await events.emit("tool", phase, tool=call.name, call_id=call.call_id, data=data)

    async def save_checkpoint() -> None:
        assert gate.store is not None
        record.checkpointed = True
        await gate.store.save_checkpoint(
            record.session_key, record.inbound_id, record.run_id, checkpoint_state(turn)
        )

    screened = await gate.screen(
        run_id=record.run_id,
        session_key=record.session_key,
        agent=record.agent,
        policy=turn.policy,
        calls=calls,
        before_wait=save_checkpoint,
        emit=emit,
        origin=turn.origin,
    )
    turn.resumed = False
    results = dict(screened.refused)
    if screened.runnable:
        store = gate.store
        if store is not None and screened.approved:
            await store.mark(screened.approved, "started_at")

        async def on_update(call: CallRequest, text: str) -> None:
            await events.emit("tool", "update", tool=call.name, call_id=call.call_id, text=text)

        ran = await _dispatch(tools, local, turn, screened.runnable, on_update)
        results.update((r.call_id, r) for r in ran)
        if store is not None and screened.approved:
            await store.mark(screened.approved, "finished_at")
    blocks = []
    ran_as = {c.call_id: c for c in screened.runnable}  # with the arguments hooks rewrote
    for call in calls:
        result = results[call.call_id]
        TOOL_CALLS.labels(call.name, "error" if result.is_error else "ok").inc()
        run = RunInfo(record.run_id, record.session_key, record.agent)
        await gate.hooks.after_tool_call(run, ran_as.get(call.call_id, call), result)
        await events.emit(
            "tool",
            "result",
            tool=call.name,
            call_id=call.call_id,
            text=result.content,
            data={"is_error": result.is_error, **result.details},
        )
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": call.call_id,
            "content": result.content,
            "is_error": result.is_error,
        }
        # For the transcript's readers (the Control UI): how the call was isolated and how long
        # it took; never sent to a model (providers.base.TRANSCRIPT_ONLY).
        block.update((k, result.details[k]) for k in TRANSCRIPT_ONLY if k in result.details)
        blocks.append(block)
    return {"role": "user", "content": blocks}


async def _dispatch(
    tools: ToolDispatcher,
    local: LocalTools | None,
    turn: Turn,
    calls: list[CallRequest],
    on_update: OnUpdate,
) -> list[CallResult]:
    """The executors run their calls while the agent runs its local ones, all at once."""
    record = turn.record
    mine = [c for c in calls if local is not None and c.name in local]
    theirs = [c for c in calls if local is None or c.name not in local]
    results: list[CallResult] = []
    jobs: list[Awaitable[list[CallResult]]] = []
    if theirs:
        jobs.append(
            tools.run_all(
                record.run_id,
                record.session_key,
                record.agent,
                theirs,
                on_update,
                standing=turn.standing,
            )
        )
    if mine and local is not None:
        ctx = LocalContext(
            record.run_id, record.session_key, record.agent, turn.origin, turn.standing
        )
        jobs.append(local.run_all(ctx, mine))
    # One job (the usual case) is awaited in this task: gather would start it in a task of its
    # own, one loop iteration later, and nats-py writes what was published in an iteration
    # with one write (the start events and the call then leave together).
    done = [await jobs[0]] if len(jobs) == 1 else await asyncio.gather(*jobs)
    for ran in done:
        results.extend(ran)
    return results
