"""Tool policies and approval rules change without a restart (issue 27, part 5): changed
SB_TOOL_POLICY and SB_TOOL_APPROVALS, handed to the agent's hook the way a changed configuration
file is (switchboard.reloads), reach the tool gate the runner asks at each call; a policy the
settings refuse leaves the running rules in place."""

from __future__ import annotations

import json

from switchboard import reloads
from switchboard.trust import Standing
from switchboard_agent.approvals.toolgate import ToolGate
from switchboard_agent.config import AgentSettings
from switchboard_agent.reloading import reload_tool_rules


def gate_of(environ: dict[str, str]) -> ToolGate:
    return ToolGate(AgentSettings.from_environ(environ).tool_rules(), None, None, 60)


def exec_allowed(gate: ToolGate) -> bool:
    policy = gate.rules.policy("main", "agent:main:main", None, standing=Standing.OWNER)
    return policy.allows("exec").allowed


def exec_held(gate: ToolGate) -> bool:
    policy = gate.rules.policy("main", "agent:main:main", None, standing=Standing.OWNER)
    return gate.rules.approvals.requires_approval("exec", {}, policy.catalogue) is not None


async def test_a_changed_policy_and_approval_rule_reach_the_gate() -> None:
    gate = gate_of({})
    assert exec_allowed(gate) and not exec_held(gate)

    async def hook(settings: AgentSettings) -> None:  # as AgentReload does for its holders
        reload_tool_rules(settings, [gate])

    token = reloads.ENVIRON.set({})  # as the host sets it for the service it starts
    try:
        unregister = reloads.register("agent", AgentSettings, hook)
    finally:
        reloads.ENVIRON.reset(token)
    assert unregister is not None
    try:
        await reloads.apply({"SB_TOOL_APPROVALS": json.dumps(["exec"])})
        assert exec_allowed(gate) and exec_held(gate)
        await reloads.apply({"SB_TOOL_POLICY": json.dumps({"deny": ["exec"]})})
        assert not exec_allowed(gate)
        running = gate.rules
        await reloads.apply({"SB_TOOL_POLICY": json.dumps({"profile": "no-such-profile"})})
        assert gate.rules is running, "a refused policy replaced the running rules"
    finally:
        unregister()
