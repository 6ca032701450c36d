"""Groups declared by the tools (their ToolSpec) and read by the policy and approval rules; a
tool whose groups the policy does not know fails closed."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.toolspec import ToolSpec
from switchboard_agent.approvals.rules import ApprovalRules
from switchboard_agent.approvals.toolgate import ToolGate, ToolRules
from switchboard_agent.tools.client import CallRequest, CallResult
from switchboard_agent.tools.local import LocalContext, LocalTools
from switchboard_agent.tools.policy import Policy, ToolPolicy, effective_policy
from switchboard_tools.mcp.tool import mcp_tool

from .tool_groups import EXPECTED_GROUPS, SPECS, knowing

OBJECT: dict[str, Any] = {"type": "object"}


def policy(config: dict[str, Any], specs: list[ToolSpec] = SPECS) -> Policy:
    return effective_policy(ToolPolicy.from_config(config)).knowing(specs)


@pytest.mark.parametrize("tool", ["exec", "mystery", "srv__x"])
def test_a_tool_not_known_is_in_every_denied_group(tool: str) -> None:
    decision = policy({"deny": ["group:runtime"]}, []).allows(tool)
    assert not decision.allowed
    assert decision.reason == f"{tool} is denied by the agent policy (deny: group:runtime)"
    # Known, it is judged by what it declares.
    known = policy({"deny": ["group:runtime"]}).allows(tool)
    assert known.allowed is (tool not in ("exec", "mystery"))


def test_a_tool_not_known_is_in_no_allowed_group() -> None:
    assert not policy({"profile": "coding"}, []).allows("read").allowed
    assert not policy({"allow": ["group:web"]}, []).allows("web_fetch").allowed
    assert not policy({"profile": "group"}, []).allows("message").allowed
    # Entries naming the tool (or a glob) need no groups.
    assert policy({"allow": ["exec"]}, []).allows("exec").allowed
    assert policy({"allow": ["web_*"]}, []).allows("web_fetch").allowed
    assert policy({"deny": ["exec"]}, []).allows("read").allowed


def test_a_tool_is_judged_by_its_declared_groups_not_its_name() -> None:
    shell = ToolSpec("my_shell", "", OBJECT, ("runtime",))
    quiet = ToolSpec("exec", "", OBJECT)  # a tool called exec declaring no group
    assert not policy({"deny": ["group:runtime"]}, [shell]).allows("my_shell").allowed
    assert policy({"profile": "coding"}, [shell]).allows("my_shell").allowed
    assert policy({"deny": ["group:runtime"]}, [quiet]).allows("exec").allowed
    # A later spec wins a name, as a local tool shadows an executor's.
    assert Policy().knowing(SPECS).knowing([quiet]).catalogue["exec"] == ()


class _Server:
    name = "srv"
    isolation: dict[str, Any] = {}

    async def call(self, tool: str, args: dict[str, Any]) -> Any:
        raise AssertionError("not called")


def test_an_mcp_tool_declares_mcp_and_group_mcp_denies_it() -> None:
    spec = mcp_tool(_Server(), "delete_repo", "Delete a repository.", OBJECT).spec()
    assert spec.name == "srv__delete_repo" and spec.groups == ("mcp",)
    denied = policy({"profile": "full", "deny": ["group:mcp"]}, [spec]).allows(spec.name)
    assert denied.reason == "srv__delete_repo is denied by the agent policy (deny: group:mcp)"
    assert policy({"profile": "coding", "allow": ["group:mcp"]}, [spec]).allows(spec.name).allowed
    assert not policy({"profile": "coding"}, [spec]).allows(spec.name).allowed


def test_an_approval_rule_on_group_runtime_holds_exec() -> None:
    rules = ApprovalRules.of(["group:runtime"])
    assert str(rules.requires_approval("exec", {"command": "ls"}, EXPECTED_GROUPS)) == (
        "group:runtime"
    )
    assert rules.requires_approval("get_time", {}, EXPECTED_GROUPS) is None
    # Fail closed: a tool not known is held too.
    assert rules.requires_approval("mystery", {}, EXPECTED_GROUPS) is not None
    assert rules.requires_approval("exec", {"command": "ls"}, {}) is not None


async def screen(rules: ToolRules, policy: Policy, calls: list[CallRequest]) -> dict[str, str]:
    """The gate's answer per call: ``run`` or the refusal's kind."""

    async def nothing(*_: Any) -> None:
        return None

    screened = await ToolGate(rules, None, None, 60.0).screen(
        run_id="r",
        session_key="main:api:u",
        agent="main",
        policy=policy,
        calls=calls,
        before_wait=nothing,
        emit=nothing,
    )
    out = {c.call_id: "run" for c in screened.runnable}
    out.update((k, str(r.details["error"])) for k, r in screened.refused.items())
    return out


async def test_the_gate_holds_and_denies_by_declared_groups() -> None:
    calls = [
        CallRequest("exec", "exec", {"command": "ls"}),
        CallRequest("time", "get_time", {}),
        CallRequest("mystery", "mystery", {}),
    ]
    held = ToolRules(approvals=ApprovalRules.of(["group:runtime"]))
    assert await screen(held, knowing(Policy()), calls) == {
        "exec": "approval_required",
        "time": "run",
        "mystery": "approval_required",
    }
    # The gate refuses no name for being unknown (the executor answers unknown_tool): the
    # policy fails closed instead, for a run that was offered no exec too.
    deny = effective_policy(ToolPolicy(deny=("group:runtime",)))
    assert await screen(ToolRules(), deny.knowing([]), calls) == {
        "exec": "policy_denied",
        "time": "policy_denied",
        "mystery": "policy_denied",
    }
    assert await screen(ToolRules(), knowing(deny), calls) == {
        "exec": "policy_denied",
        "time": "run",
        "mystery": "policy_denied",
    }


class _Typo:
    spec = ToolSpec("notes", "", OBJECT, ("memory", "memroy"))

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        raise AssertionError("not run")


def test_local_tools_refuse_a_group_outside_the_vocabulary() -> None:
    with pytest.raises(ValueError, match="tool 'notes' declares unknown group 'memroy'"):
        LocalTools([_Typo()])
