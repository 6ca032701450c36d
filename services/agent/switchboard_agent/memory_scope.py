"""Whose memory a session reads and writes (DESIGN.md section 8): pure functions, no I/O.

- a direct session ``<agent>:<channel>:<peer>``: the agent's own memory (user ""), or with
  ``SB_MEMORY_SCOPE=user`` (an agent several people talk to) the person's, ``dm:<channel>:<peer>``;
- a group ``<agent>:<channel>:group:<id>``: always the group's own, ``group:<channel>:<id>``, so
  a group never sees what was said or stored in private (nor ``MEMORY.md``), and the reverse;
- a sub-agent: its root session's scope;
- hooks, cron jobs and other keys: the agent's own memory.
"""

from __future__ import annotations

from typing import Literal

from switchboard.sessions import parse_session_key

ScopeMode = Literal["agent", "user"]
AGENT_OWN = ""


def memory_user(session_key: str, mode: ScopeMode = "agent") -> str:
    key = parse_session_key(session_key).root
    if key.kind == "group":
        return f"group:{key.channel}:{key.peer}"
    if key.kind == "direct" and mode == "user":
        return f"dm:{key.channel}:{key.peer}"
    return AGENT_OWN


def reads_memory_files(session_key: str, mode: ScopeMode = "agent") -> bool:
    """Whether the agent's memory files (``MEMORY.md``, ``memory/*.md``, indexed in its own
    scope) belong to this session's scope."""
    return memory_user(session_key, mode) == AGENT_OWN
