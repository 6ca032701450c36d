"""Whose memory a run uses (docs/trust.md): groups never share a scope with direct chats,
sub-agents use their root's, per-user memory keeps people apart when asked for, and only the
owner's standing ever reaches the agent's own memory (where MEMORY.md is indexed)."""

from __future__ import annotations

import pytest

from switchboard.trust import Standing
from switchboard_agent.memory.scope import ScopeMode, memory_user, reads_memory_files

OWNER, PERSONAL, GROUP = Standing.OWNER, Standing.PERSONAL, Standing.GROUP


@pytest.mark.parametrize(
    ("key", "mode", "standing", "user"),
    [
        # the owner's standing: as before issue 23
        ("main:telegram:42", "agent", OWNER, ""),
        ("main:telegram:42", "user", OWNER, "dm:telegram:42"),
        ("main:telegram:42:sub:abc", "user", OWNER, "dm:telegram:42"),
        ("hook:github", "user", OWNER, ""),
        ("cron:daily", "agent", OWNER, ""),
        ("my-own-session", "user", OWNER, ""),
        # a group: always the group's own, whoever speaks
        ("main:slack:group:C9", "agent", GROUP, "group:slack:C9"),
        ("main:slack:group:C9", "user", GROUP, "group:slack:C9"),
        ("main:slack:group:C9:sub:x:sub:y", "agent", GROUP, "group:slack:C9"),
        ("main:slack:group:C9", "agent", OWNER, "group:slack:C9"),
        # a person who is not the owner: their own, never the agent's, whatever the mode
        ("main:telegram:42", "agent", PERSONAL, "dm:telegram:42"),
        ("main:telegram:42", "user", PERSONAL, "dm:telegram:42"),
        ("main:telegram:42:sub:abc", "agent", PERSONAL, "dm:telegram:42"),
        # a second bot's (or Slack workspace's) chats: scopes of their own
        ("main:telegram@family:42", "agent", PERSONAL, "dm:telegram@family:42"),
        ("main:slack@acme:group:C9", "agent", GROUP, "group:slack@acme:C9"),
        # other sessions out of the owner's standing: their root's own
        ("hook:github", "agent", PERSONAL, "session:hook:github"),
        ("cron:daily:sub:s1", "agent", PERSONAL, "session:cron:daily"),
        ("my-own-session", "agent", PERSONAL, "session:my-own-session"),
        ("main:telegram:42", "agent", GROUP, "session:main:telegram:42"),
    ],
)
def test_scope_of_each_kind_of_session(
    key: str, mode: ScopeMode, standing: Standing, user: str
) -> None:
    assert memory_user(key, mode, standing) == user


def test_only_the_owners_standing_reads_the_agents_memory_files() -> None:
    assert reads_memory_files("main:webchat:me", "agent", OWNER)
    assert reads_memory_files("cron:daily", "agent", OWNER)
    assert not reads_memory_files("main:webchat:me", "agent", PERSONAL)
    assert not reads_memory_files("cron:daily", "agent", PERSONAL)
    assert not reads_memory_files("main:webchat:group:team", "agent", GROUP)
    assert not reads_memory_files("main:webchat:me", "user", OWNER)
