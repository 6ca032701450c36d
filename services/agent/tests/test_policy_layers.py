"""Tool policy layering: agent -> session -> sub-agent, and filtering tool specs."""

from __future__ import annotations

import pytest

from switchboard.sessions import is_subagent as is_subagent_session
from switchboard_agent.tools.policy import DEFAULT_SUBAGENT_DENY, ToolPolicy, effective_policy

from .tool_groups import knowing

CODING = ToolPolicy(profile="coding")


@pytest.mark.parametrize(
    ("agent", "session", "key", "subagent", "tool", "allowed", "reason"),
    [
        # a session cannot grant what the agent does not allow
        (CODING, ToolPolicy(allow=("message",)), "a:tg:1", None, "message", False, "agent policy"),
        (CODING, ToolPolicy(profile="full"), "a:tg:1", None, "cron", False, "agent policy"),
        (
            ToolPolicy(deny=("exec",)),
            ToolPolicy(allow=("exec",)),
            "a:tg:1",
            None,
            "exec",
            False,
            "exec is denied by the agent policy (deny: exec)",
        ),
        # a session narrows
        (
            CODING,
            ToolPolicy(deny=("group:runtime",)),
            "a:tg:1",
            None,
            "exec",
            False,
            "exec is denied by the session policy (deny: group:runtime)",
        ),
        (
            CODING,
            ToolPolicy(allow=("read",)),
            "a:tg:1",
            None,
            "write",
            False,
            "write is not allowed by the session policy (not in allow: read)",
        ),
        (
            CODING,
            ToolPolicy(allow=("read",)),
            "a:tg:1",
            None,
            "read",
            True,
            "read is allowed by the agent policy (profile: coding)"
            " and the session policy (allow: read)",
        ),
        # sub-agent sessions get the default deny list
        *[
            (
                ToolPolicy(profile="full"),
                None,
                "a:tg:1:sub:7",
                None,
                tool,
                False,
                f"{tool} is denied by the sub-agent policy (deny: {tool})",
            )
            for tool in DEFAULT_SUBAGENT_DENY
        ],
        (CODING, None, "a:tg:1:sub:7", None, "read", True, "(profile: coding)"),
        (ToolPolicy(profile="full"), None, "a:tg:1", None, "cron", True, "(profile: full)"),
        # an explicit sub-agent policy replaces the default deny list, still under the agent's
        (CODING, None, "a:x:sub:1", ToolPolicy(deny=("cron",)), "memory_store", True, "coding"),
        (CODING, None, "a:x:sub:1", ToolPolicy(deny=("exec",)), "exec", False, "sub-agent"),
        (CODING, None, "a:x:sub:1", ToolPolicy(profile="full"), "message", False, "agent policy"),
        # the sub-agent layer is ignored for other sessions
        (CODING, None, "a:x:1", ToolPolicy(deny=("exec",)), "exec", True, "(profile: coding)"),
        # no agent layer: session alone
        (None, ToolPolicy(profile="minimal"), "a:x:1", None, "exec", False, "session policy"),
    ],
)
def test_layering(
    agent: ToolPolicy | None,
    session: ToolPolicy | None,
    key: str,
    subagent: ToolPolicy | None,
    tool: str,
    allowed: bool,
    reason: str,
) -> None:
    decision = knowing(effective_policy(agent, session, session_key=key, subagent=subagent)).allows(
        tool
    )
    assert decision.allowed is allowed
    assert reason in decision.reason


@pytest.mark.parametrize(
    ("key", "sub"),
    [("a:tg:1", False), ("a:tg:1:sub:2", True), ("a:tg:1:sub:2:sub:3", True), ("a:tg:sub", False)],
)
def test_subagent_session_keys(key: str, sub: bool) -> None:
    assert is_subagent_session(key) is sub


def test_filter_specs_keeps_order_and_unknown_names() -> None:
    policy = knowing(
        effective_policy(ToolPolicy(profile="coding", allow=("srv__*",), deny=("write",)))
    )
    names = ["write", "srv__b", "read", "message", "exec", "srv__a", "other"]
    assert policy.filter_specs(names) == ["srv__b", "read", "exec", "srv__a"]
    assert policy.filter_specs([]) == []
