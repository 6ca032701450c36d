"""Tool policy: groups, profiles, globs, one layer's rules and reasons, config parsing."""

from __future__ import annotations

from typing import Any, cast

import pytest

from switchboard.toolspec import GROUPS
from switchboard_agent.compaction.memory_flush import MemoryFileStore
from switchboard_agent.media.image_tool import SPEC as IMAGE
from switchboard_agent.memory.tools import MemoryGet, MemorySearch, MemoryStore
from switchboard_agent.subagents.session_tools import HISTORY_SPEC, LIST_SPEC, SEND_SPEC
from switchboard_agent.subagents.spawn_tool import _spawn_spec
from switchboard_agent.tools.cron import SPEC as CRON
from switchboard_agent.tools.local import LocalTool
from switchboard_agent.tools.message import MessageTool
from switchboard_agent.tools.policy import (
    PROFILES,
    Decision,
    Entry,
    Policy,
    PolicyError,
    ToolPolicy,
    effective_policy,
)
from switchboard_agent.workspace.skills import SkillReadTool
from switchboard_tools.builtin import builtin_registry
from switchboard_tools.mcp.tool import McpTool
from switchboard_tools.sandbox import ProcessSandbox
from switchboard_tools.tools.a2a_delegate import A2ADelegateTool

from .tool_groups import BUILTIN, EXECUTOR_GROUPS, EXPECTED_GROUPS, LOCAL_GROUPS, knowing


def one(config: dict[str, Any] | None, tool: str) -> Decision:
    return knowing(effective_policy(ToolPolicy.from_config(config))).allows(tool)


@pytest.mark.parametrize(
    ("group", "tool"), [(g, t) for t, gs in EXPECTED_GROUPS.items() for g in gs]
)
def test_group_entry_matches_each_member(group: str, tool: str) -> None:
    entry = Entry.parse(f"group:{group}")
    assert entry.matches(tool, EXPECTED_GROUPS[tool])
    assert not entry.matches(tool, tuple(g for g in EXPECTED_GROUPS[tool] if g != group))


def test_groups_hold_the_design_tools() -> None:
    members = {g: {t for t, gs in EXPECTED_GROUPS.items() if g in gs} for g in GROUPS}
    assert members["fs"] == {"read", "write", "edit", "apply_patch", "list_dir", "search_files"}
    assert members["fs"] == members["fs_read"] | members["fs_write"]
    assert members["runtime"] == {"exec", "process"}
    assert members["memory"] == {"memory_search", "memory_get", "memory_store"}
    assert members["automation"] == {"cron"}
    assert all(members.values()), "every group of the vocabulary has a tool"


def test_executor_tools_declare_the_table() -> None:
    declared = {spec.name: spec.groups for spec in builtin_registry(ProcessSandbox()).specs()}
    declared[A2ADelegateTool.name] = A2ADelegateTool.groups  # offered with SB_A2A_AGENTS
    assert declared == EXECUTOR_GROUPS
    assert McpTool.groups == ("mcp",)


def test_local_tools_declare_the_table() -> None:
    nothing = cast(Any, None)  # the specs need none of what the tools run with
    tools: list[LocalTool] = [
        MemorySearch(nothing, "agent"),
        MemoryGet(nothing, "agent"),
        MemoryStore(nothing, "agent"),
        MessageTool(nothing),
        SkillReadTool(nothing),
    ]
    specs = [t.spec for t in tools] + [IMAGE, CRON, LIST_SPEC, HISTORY_SPEC, SEND_SPEC]
    specs.append(_spawn_spec(3))
    assert {spec.name: spec.groups for spec in specs} == LOCAL_GROUPS
    # The compaction's memory_store without the memory service is judged like the service's.
    assert MemoryFileStore.SPEC.groups == LOCAL_GROUPS["memory_store"]


@pytest.mark.parametrize(
    ("entry", "tool", "matches"),
    [
        ("exec", "exec", True),
        ("exec", "exec2", False),
        ("exec", "Exec", False),  # case-sensitive
        ("exec*", "exec", True),
        ("exec*", "exec_bg", True),
        ("exec*", "my_exec", False),  # whole-name match
        ("*", "anything__at_all", True),
        ("memory_*", "memory_store", True),
        ("memory_*", "memory", False),
        ("*_list", "sessions_list", True),
        ("github__*", "github__create_issue", True),
        ("github__*", "gitlab__create_issue", False),
        ("to?l", "tool", False),  # ? is literal
        ("to?l", "to?l", True),
        ("[ab]x", "ax", False),  # [ is literal
        ("[ab]x", "[ab]x", True),
        ("a.b", "axb", False),  # regex metacharacters are literal
        ("group:mcp", "srv__tool", True),
        ("group:mcp", "exec", False),
        ("bash", "exec", True),  # alias
        ("shell", "exec", True),
        ("apply-patch", "apply_patch", True),
    ],
)
def test_entry_matching(entry: str, tool: str, matches: bool) -> None:
    assert Entry.parse(entry).matches(tool, EXPECTED_GROUPS.get(tool, ("mcp",))) is matches


PROFILE_TABLE = [
    ("minimal", {"get_time"}),
    # a2a: delegating to remote agents is in no profile but full
    ("coding", set(BUILTIN) - {"message", "cron", "a2a_delegate"}),
    (
        "messaging",
        {"message", "sessions_list", "sessions_history", "get_time", "web_search", "image"},
    ),
    # group chats (SB_GROUP_TOOL_PROFILE's default, docs/trust.md): no writes, no commands, no
    # session tools, no jobs, no MCP or A2A
    (
        "group",
        {"read", "list_dir", "search_files", "web_fetch", "web_search", "get_time"}
        | {"memory_search", "memory_get", "memory_store", "image", "message"},
    ),
    ("full", set(BUILTIN)),
]


@pytest.mark.parametrize(("profile", "expected"), PROFILE_TABLE)
def test_profiles(profile: str, expected: set[str]) -> None:
    policy = knowing(effective_policy(ToolPolicy(profile=profile)))
    assert set(policy.filter_specs(BUILTIN)) == expected


def test_every_profile_is_covered() -> None:
    assert {p for p, _ in PROFILE_TABLE} == set(PROFILES)


@pytest.mark.parametrize(
    ("config", "tool", "allowed", "reason"),
    [
        # no profile, no allow: no restriction
        (None, "exec", True, "exec is allowed (no tool policy restricts it)"),
        ({}, "srv__x", True, "srv__x is allowed (no tool policy restricts it)"),
        ({"allow": []}, "exec", True, "exec is allowed (no tool policy restricts it)"),
        # no profile + allow: restricts
        ({"allow": ["read"]}, "read", True, "read is allowed by the agent policy (allow: read)"),
        (
            {"allow": ["read", "group:web"]},
            "exec",
            False,
            "exec is not allowed by the agent policy (not in allow: read, group:web)",
        ),
        # profile: base set
        (
            {"profile": "minimal"},
            "get_time",
            True,
            "get_time is allowed by the agent policy (profile: minimal)",
        ),
        (
            {"profile": "minimal"},
            "exec",
            False,
            "exec is not allowed by the agent policy (not in profile: minimal)",
        ),
        # profile + allow: allow adds
        (
            {"profile": "minimal", "allow": ["web_*"]},
            "web_fetch",
            True,
            "web_fetch is allowed by the agent policy (allow: web_*)",
        ),
        (
            {"profile": "minimal", "allow": ["web_*"]},
            "exec",
            False,
            "exec is not allowed by the agent policy (not in profile: minimal; allow: web_*)",
        ),
        # deny always wins: over profile, over allow, over full, and alone
        (
            {"profile": "coding", "deny": ["group:runtime"]},
            "exec",
            False,
            "exec is denied by the agent policy (deny: group:runtime)",
        ),
        (
            {"allow": ["exec"], "deny": ["exec"]},
            "exec",
            False,
            "exec is denied by the agent policy (deny: exec)",
        ),
        (
            {"profile": "full", "deny": ["*__*"]},
            "srv__x",
            False,
            "srv__x is denied by the agent policy (deny: *__*)",
        ),
        ({"deny": ["bash"]}, "exec", False, "exec is denied by the agent policy (deny: bash)"),
        ({"deny": ["cron"]}, "exec", True, "exec is allowed (no tool policy restricts it)"),
        ({"deny": ["*"]}, "get_time", False, "get_time is denied by the agent policy (deny: *)"),
        # unknown (MCP) names exist and follow the same rules
        (
            {"profile": "full"},
            "srv__x",
            True,
            "srv__x is allowed by the agent policy (profile: full)",
        ),
        (
            {"profile": "coding", "allow": ["group:mcp"]},
            "srv__x",
            True,
            "srv__x is allowed by the agent policy (allow: group:mcp)",
        ),
    ],
)
def test_single_layer(config: dict[str, Any] | None, tool: str, allowed: bool, reason: str) -> None:
    assert one(config, tool) == Decision(allowed, reason)


@pytest.mark.parametrize("tool", ["", None, 3])
def test_bad_tool_names_are_denied(tool: Any) -> None:
    decision = Policy().allows(tool)
    assert not decision.allowed
    assert "is not a tool name" in decision.reason


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([], "tools: expected an object, got list"),
        ("coding", "tools: expected an object, got str"),
        ({"profile": "admin"}, "tools.profile: unknown profile 'admin'"),
        ({"profile": 1}, "tools.profile: expected a string, got int"),
        ({"alow": ["exec"]}, "tools: unknown key(s) alow; expected profile, allow, deny"),
        ({"allow": "exec"}, "tools.allow: expected a list of tool names, got str"),
        ({"deny": {"exec": True}}, "tools.deny: expected a list of tool names, got dict"),
        ({"allow": ["exec", 2]}, "tools.allow[1]: expected a tool name string, got int"),
        ({"deny": ["group:shell"]}, "tools.deny[0]: unknown group 'group:shell'; known groups:"),
        ({"deny": ["group:*"]}, "unknown group 'group:*'"),
        ({"allow": [""]}, "tools.allow[0]: '' is not a tool name"),
        ({"allow": ["exec, read"]}, "tools.allow[0]: 'exec, read' is not a tool name"),
        ({"allow": [" exec"]}, "is not a tool name"),
    ],
)
def test_config_errors(config: Any, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        ToolPolicy.from_config(config)
    assert message in str(err.value)
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"profile": "nope"}, "unknown profile 'nope'"),
        ({"allow": ("group:nope",)}, "allow[0]: unknown group"),
        ({"deny": (5,)}, "deny[0]: expected a tool name string"),
    ],
)
def test_direct_construction_is_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ToolPolicy(**kwargs)


def test_from_json_and_round_trip() -> None:
    text = '{"profile": "coding", "allow": ["group:mcp"], "deny": ["exec", "write*"]}'
    policy = ToolPolicy.from_json(text)
    assert policy == ToolPolicy("coding", ("group:mcp",), ("exec", "write*"))
    assert ToolPolicy.from_config(policy.to_config()) == policy
    assert ToolPolicy.from_json("null") == ToolPolicy()
    assert ToolPolicy.from_config({"allow": ["read"]}).to_config() == {
        "allow": ["read"],
        "deny": [],
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [("{", "agent.tools: not valid JSON"), ('{"profile": "x"}', "agent.tools.profile: unknown")],
)
def test_from_json_errors(text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        ToolPolicy.from_json(text, where="agent.tools")


def test_policies_are_frozen_and_hashable() -> None:
    policy = ToolPolicy(profile="coding", allow=("a",))
    with pytest.raises(AttributeError):
        policy.profile = "full"  # type: ignore[misc]
    assert hash(policy) == hash(ToolPolicy(profile="coding", allow=("a",)))
