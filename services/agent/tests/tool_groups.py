"""The policy groups each tool declares today (its ``ToolSpec.groups``), for the policy tests:
test_policy.py asserts the tools' own declarations against this table, and the other tests
judge tool names with a policy that knows these groups, as a run's does (``Policy.knowing``)."""

from __future__ import annotations

from switchboard.toolspec import ToolSpec
from switchboard_agent.tools.policy import Policy

FS_READ = ("fs", "fs_read")
FS_WRITE = ("fs", "fs_write")
EXECUTOR_GROUPS: dict[str, tuple[str, ...]] = {
    "read": FS_READ,
    "list_dir": FS_READ,
    "search_files": FS_READ,
    "write": FS_WRITE,
    "edit": FS_WRITE,
    "apply_patch": FS_WRITE,
    "exec": ("runtime",),
    "process": ("runtime",),
    "web_fetch": ("web",),
    "web_search": ("web",),
    "get_time": ("time",),
    "a2a_delegate": ("a2a",),
}
LOCAL_GROUPS: dict[str, tuple[str, ...]] = {
    "memory_search": ("memory",),
    "memory_get": ("memory",),
    "memory_store": ("memory",),
    "sessions_list": ("sessions",),
    "sessions_history": ("sessions",),
    "sessions_spawn": ("sessions",),
    "sessions_send": ("sessions",),
    "message": ("messaging",),
    "cron": ("automation",),
    "image": ("media",),
    "skill_read": (),
}
MCP_TOOL = "srv__x"  # an MCP server's tool: every one declares ("mcp",)
EXPECTED_GROUPS = {**EXECUTOR_GROUPS, **LOCAL_GROUPS, MCP_TOOL: ("mcp",)}
BUILTIN = sorted(name for name in EXPECTED_GROUPS if "__" not in name and name != "skill_read")
SPECS = [ToolSpec(name, "", {"type": "object"}, groups) for name, groups in EXPECTED_GROUPS.items()]


def knowing(policy: Policy) -> Policy:
    """``policy`` knowing the groups of every tool of the table."""
    return policy.knowing(SPECS)
