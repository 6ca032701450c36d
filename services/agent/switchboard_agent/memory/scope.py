"""Whose memory a run reads and writes (docs/memory-recall.md, docs/trust.md): pure functions,
no I/O. The scope follows the session and the run's standing (:mod:`..sessions.standing`):

- a group ``<agent>:<channel>:group:<id>`` (and its sub-agents): always the group's own,
  ``group:<channel>:<id>``, so a group never sees what was said or stored in private (nor
  ``MEMORY.md``), and the reverse;
- the owner's standing: the agent's own memory (user ""), where ``MEMORY.md`` and
  ``memory/*.md`` are indexed; or with ``SB_MEMORY_SCOPE=user`` (an agent several people talk
  to) a direct session's person's, ``dm:<channel>:<peer>``;
- any other standing: never the agent's own. A direct session's person's
  (``dm:<channel>:<peer>`` of the root session); a ``hook:``, ``cron:`` or custom session (or a
  group's standing outside a group key) its root session's own, ``session:<root key>``;
- a sub-agent: its root session's scope.
"""

from __future__ import annotations

from typing import Literal

from switchboard.sessions import parse_session_key
from switchboard.trust import Standing

ScopeMode = Literal["agent", "user"]
AGENT_OWN = ""


def memory_user(session_key: str, mode: ScopeMode, standing: Standing) -> str:
    key = parse_session_key(session_key).root
    if key.kind == "group":
        return f"group:{key.channel}:{key.peer}"
    if standing is Standing.OWNER:
        if key.kind == "direct" and mode == "user":
            return f"dm:{key.channel}:{key.peer}"
        return AGENT_OWN
    if key.kind == "direct" and standing is Standing.PERSONAL:
        return f"dm:{key.channel}:{key.peer}"
    return f"session:{key.key}"


def reads_memory_files(session_key: str, mode: ScopeMode, standing: Standing) -> bool:
    """Whether the agent's memory files (``MEMORY.md``, ``memory/*.md``, indexed in its own
    scope) belong to this run's scope: only ever from the owner's standing."""
    return memory_user(session_key, mode, standing) == AGENT_OWN
