"""The tool phase of a turn: policy and approvals (``toolgate``), then the executors."""

from __future__ import annotations

from typing import Any

from .metrics import TOOL_CALLS
from .store import Message
from .toolgate import ToolGate
from .tools_client import CallRequest, ToolDispatcher
from .turn import Turn, checkpoint_state


async def run_tools(
    gate: ToolGate, tools: ToolDispatcher, turn: Turn, uses: list[dict[str, Any]]
) -> Message:
    """One turn's tool calls: start events, the gate (policy, approvals), the executors,
    result events; the tool_result message for the transcript."""
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
    )
    turn.resumed = False
    results = dict(screened.refused)
    if screened.runnable:
        store = gate.store
        if store is not None and screened.approved:
            await store.mark(screened.approved, "started_at")

        async def on_update(call: CallRequest, text: str) -> None:
            await events.emit("tool", "update", tool=call.name, call_id=call.call_id, text=text)

        ran = await tools.run_all(
            record.run_id, record.session_key, record.agent, screened.runnable, on_update
        )
        results.update((r.call_id, r) for r in ran)
        if store is not None and screened.approved:
            await store.mark(screened.approved, "finished_at")
    blocks = []
    for call in calls:
        result = results[call.call_id]
        TOOL_CALLS.labels(call.name, "error" if result.is_error else "ok").inc()
        await events.emit(
            "tool",
            "result",
            tool=call.name,
            call_id=call.call_id,
            text=result.content,
            data={"is_error": result.is_error, **result.details},
        )
        blocks.append(
            {
                "type": "tool_result",
                "tool_use_id": call.call_id,
                "content": result.content,
                "is_error": result.is_error,
            }
        )
    return {"role": "user", "content": blocks}
