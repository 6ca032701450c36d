"""What stands between a model's tool call and an executor: the tool policy (agent -> session ->
group -> sub-agent) and approvals. Denied calls become readable tool errors; calls that need
approval get a ToolCall row and wait (see :mod:`.store`) without holding an executor."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from switchboard.trust import GROUP_PROFILE, Standing
from switchboard.v1 import messages_pb2

from ..metrics import APPROVALS, POLICY_DENIALS
from ..plugins.hooks import Hooks, RunInfo
from ..tools.client import CallRequest, CallResult
from ..tools.policy import Policy, ToolPolicy, effective_policy
from .rules import ApprovalRules
from .store import AWAITING, ApprovalRow, ApprovalStore, ApprovalWaiter

GROUP_LAYER = ToolPolicy(profile=GROUP_PROFILE)


@dataclass(frozen=True)
class ToolRules:
    """The configured policies and approval rules (validated when the settings load).
    ``group``: the layer a run of a group's standing gets (``SB_GROUP_TOOL_PROFILE``; None:
    none, ``full``)."""

    default: ToolPolicy | None = None
    per_agent: Mapping[str, ToolPolicy] = field(default_factory=dict)
    subagent: ToolPolicy | None = None
    approvals: ApprovalRules = field(default_factory=ApprovalRules)
    group: ToolPolicy | None = GROUP_LAYER

    def policy(
        self,
        agent: str,
        session_key: str,
        session: Mapping[str, Any] | None,
        *,
        standing: Standing,
    ) -> Policy:
        """The effective policy of a run of ``standing`` in one session; ``session`` is the
        session's stored override."""
        agent_policy = self.per_agent.get(agent, self.default)
        session_policy = ToolPolicy.from_config(session, "session") if session else None
        return effective_policy(
            agent_policy,
            session_policy,
            session_key=session_key,
            subagent=self.subagent,
            group=self.group if standing is Standing.GROUP else None,
        )


@dataclass
class Screened:
    """A turn's calls after the gate: those to run, and refusals already answered."""

    runnable: list[CallRequest]
    refused: dict[str, CallResult]
    approved: list[str]  # approval ids of runnable calls, to stamp started/finished


def refusal(call: CallRequest, text: str, kind: str, **details: Any) -> CallResult:
    return CallResult(call.call_id, text, True, {"error": kind, **details})


Emit = Callable[[str, CallRequest, dict[str, Any]], Awaitable[None]]
# Tells the run's chat that a call waits for an approval (approvals/notice.py).
Announce = Callable[[messages_pb2.LaneItem, CallRequest, ApprovalRow], Awaitable[None]]


class ToolGate:
    def __init__(
        self,
        rules: ToolRules,
        store: ApprovalStore | None,
        waiter: ApprovalWaiter | None,
        timeout_s: float,
    ) -> None:
        self.rules = rules
        self.store = store
        self.waiter = waiter
        self.timeout_s = timeout_s
        # Wraps the wait for a person: the agent's PullWorker lends the run's slot meanwhile,
        # so runs waiting for approvals do not starve the replica.
        self.while_waiting: Callable[[], AbstractAsyncContextManager[None]] = _nothing
        self.announce: Announce | None = None
        self.hooks = Hooks()  # plugins' before_tool_call hooks: after the policy, may block

    async def screen(
        self,
        *,
        run_id: str,
        session_key: str,
        agent: str,
        policy: Policy,
        calls: list[CallRequest],
        before_wait: Callable[[], Awaitable[None]],
        emit: Emit,
        origin: messages_pb2.LaneItem | None = None,
    ) -> Screened:
        """Apply the policy, then ask for (or find, when resumed) approvals and wait for them.
        ``before_wait`` runs once before waiting (the runner saves its checkpoint there);
        ``origin`` (the run's lane item): its chat is told about each call waiting."""
        out = Screened([], {}, [])
        gated: list[tuple[CallRequest, str]] = []
        for call in calls:
            decision = policy.allows(call.name)
            if not decision.allowed:
                POLICY_DENIALS.labels(call.name).inc()
                out.refused[call.call_id] = refusal(
                    call, f"Tool call refused: {decision.reason}.", "policy_denied"
                )
                continue
            checked = await self.hooks.before_tool_call(RunInfo(run_id, session_key, agent), call)
            if isinstance(checked, CallResult):
                out.refused[call.call_id] = checked
                continue
            call = checked  # a hook may have rewritten its arguments
            matched = self.rules.approvals.requires_approval(call.name, call.args, policy.catalogue)
            if matched is None:
                out.runnable.append(call)
            else:
                gated.append((call, str(matched)))
        if not gated:
            return out
        if self.store is None or self.waiter is None:
            for call, rule in gated:
                out.refused[call.call_id] = refusal(
                    call, f"{call.name} requires approval ({rule}).", "approval_required"
                )
            return out
        rows: dict[str, ApprovalRow] = {}
        for call, rule in gated:
            row = await self.store.request(
                run_id=run_id,
                session_key=session_key,
                agent=agent,
                call_id=call.call_id,
                tool=call.name,
                args=call.args,
                rule=rule,
            )
            rows[call.call_id] = row
        waiting = [r for r in rows.values() if r.status == AWAITING]
        if waiting:
            await before_wait()
            for call, _ in gated:
                row = rows[call.call_id]
                if row.status == AWAITING:
                    APPROVALS.labels("requested").inc()
                    await emit("approval", call, _approval_data(row))
                    if self.announce is not None and origin is not None:
                        await self.announce(origin, call, row)
            async with self.while_waiting():
                decided = await self.waiter.wait(run_id, list(rows.values()), self.timeout_s)
            rows = {r.call_id: decided.get(r.approval_id, r) for r in rows.values()}
        for call, _ in gated:
            row = rows[call.call_id]
            APPROVALS.labels(row.status).inc()
            if waiting:
                await emit("approval", call, _approval_data(row))
            if row.status == "approved":
                out.runnable.append(call)
                out.approved.append(row.approval_id)
            else:
                why = f": {row.reason}" if row.reason else ""
                out.refused[call.call_id] = refusal(
                    call,
                    f"The call to {call.name} was not approved ({row.status}{why}).",
                    "not_approved",
                    approval_id=row.approval_id,
                    status=row.status,
                )
        return out


@contextlib.asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


def _approval_data(row: ApprovalRow) -> dict[str, Any]:
    return {
        "approval_id": row.approval_id,
        "status": row.status,
        "rule": row.rule,
        "args": row.args,
    }
