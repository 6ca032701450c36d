"""Whose memory a session uses: groups never share a scope with direct chats, sub-agents use
their root's, and per-user memory keeps people apart when asked for."""

from __future__ import annotations

import pytest

from switchboard_agent.memory_scope import memory_user, reads_memory_files


@pytest.mark.parametrize(
    ("key", "mode", "user"),
    [
        ("main:telegram:42", "agent", ""),
        ("main:telegram:42", "user", "dm:telegram:42"),
        ("main:slack:group:C9", "agent", "group:slack:C9"),
        ("main:slack:group:C9", "user", "group:slack:C9"),
        ("main:telegram:42:sub:abc", "user", "dm:telegram:42"),
        ("main:slack:group:C9:sub:x:sub:y", "agent", "group:slack:C9"),
        ("hook:github", "user", ""),
        ("cron:daily", "agent", ""),
        ("my-own-session", "user", ""),
    ],
)
def test_scope_of_each_kind_of_session(key: str, mode: str, user: str) -> None:
    assert memory_user(key, mode) == user  # type: ignore[arg-type]


def test_only_the_agents_own_scope_reads_its_memory_files() -> None:
    assert reads_memory_files("main:webchat:me")
    assert not reads_memory_files("main:webchat:group:team")
    assert not reads_memory_files("main:webchat:me", "user")
