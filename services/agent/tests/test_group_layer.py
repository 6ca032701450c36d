"""The group layer (docs/trust.md): a run of a group's standing gets ``SB_GROUP_TOOL_PROFILE``
after the session layer (the ``group`` profile by default, ``full`` for the behaviour before),
validated when the agent starts; other standings never get it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from switchboard.trust import Standing
from switchboard_agent.approvals.toolgate import ToolRules
from switchboard_agent.config import AgentSettings
from switchboard_agent.tools.policy import FULL_POLICY, PolicyError, ToolPolicy, group_layer

from .tool_groups import knowing

GROUP_KEY = "main:telegram:group:-100"


def rules(setting: str | None = None) -> ToolRules:
    env = {"SB_GROUP_TOOL_PROFILE": setting} if setting is not None else {}
    return AgentSettings.from_environ(env).tool_rules()


@pytest.mark.parametrize("tool", ["exec", "write", "sessions_list", "sessions_send", "cron"])
def test_by_default_a_group_gets_no_writes_commands_sessions_or_jobs(tool: str) -> None:
    policy = knowing(rules().policy("main", GROUP_KEY, None, standing=Standing.GROUP))
    decision = policy.allows(tool)
    assert not decision.allowed
    assert decision.reason == f"{tool} is not allowed by the group policy (not in profile: group)"
    # The same session key at another standing: no group layer.
    owner = knowing(rules().policy("main", "main:telegram:1", None, standing=Standing.OWNER))
    assert owner.allows(tool).allowed
    personal = knowing(rules().policy("main", "main:telegram:1", None, standing=Standing.PERSONAL))
    assert personal.allows(tool).allowed


@pytest.mark.parametrize("tool", ["read", "web_search", "memory_search", "message", "image"])
def test_a_group_may_talk_and_look_things_up(tool: str) -> None:
    decision = knowing(rules().policy("main", GROUP_KEY, None, standing=Standing.GROUP)).allows(
        tool
    )
    assert decision.allowed and "the group policy (profile: group)" in decision.reason


def test_the_layer_comes_after_the_session_and_before_the_sub_agent() -> None:
    configured = ToolRules(default=ToolPolicy(profile="coding"), group=ToolPolicy(profile="group"))
    policy = knowing(
        configured.policy(
            "main", f"{GROUP_KEY}:sub:x", {"deny": ["web_fetch"]}, standing=Standing.GROUP
        )
    )
    assert [name for name, _ in policy.layers] == ["agent", "session", "group", "sub-agent"]
    assert "denied by the session policy" in policy.allows("web_fetch").reason
    assert "not allowed by the group policy" in policy.allows("exec").reason
    assert "denied by the sub-agent policy" in policy.allows("memory_store").reason


def test_full_restores_the_old_behaviour_and_an_object_is_a_layer() -> None:
    full = knowing(rules("full").policy("main", GROUP_KEY, None, standing=Standing.GROUP))
    assert full.layers == () and full.allows("exec").allowed
    custom = rules('{"profile": "group", "allow": ["cron"], "deny": ["message"]}')
    policy = knowing(custom.policy("main", GROUP_KEY, None, standing=Standing.GROUP))
    assert policy.allows("cron").allowed and not policy.allows("message").allowed
    assert (
        knowing(rules("minimal").policy("main", GROUP_KEY, None, standing=Standing.GROUP))
        .allows("get_time")
        .allowed
    )


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ("admin", "group_tool_profile: unknown profile 'admin'"),
        ('{"profile": "group", "deny": "exec"}', "group_tool_profile.deny"),
        ('{"profile": "nope"}', "group_tool_profile.profile: unknown profile 'nope'"),
        ('{"allow": ["exec"], "extra": 1}', "unknown key(s) extra"),
        ("{not json", "group_tool_profile: not valid JSON"),
    ],
)
def test_a_bad_setting_is_refused_at_start(setting: str, says: str) -> None:
    with pytest.raises(ValidationError) as err:
        AgentSettings.from_environ({"SB_GROUP_TOOL_PROFILE": setting})
    assert says in str(err.value)


def test_group_layer_parses_names_objects_and_the_settings() -> None:
    assert group_layer("group") == ToolPolicy(profile="group")
    assert group_layer(" full ") == FULL_POLICY
    assert group_layer({"deny": ["exec"]}) == ToolPolicy(deny=("exec",))
    settings = AgentSettings.from_environ({"SB_GROUP_TOOL_PROFILE": "minimal"})
    assert group_layer(settings) == ToolPolicy(profile="minimal")  # as the audit asks
    assert group_layer(AgentSettings.from_environ({})) == ToolPolicy(profile="group")
    with pytest.raises(PolicyError):
        group_layer("")
