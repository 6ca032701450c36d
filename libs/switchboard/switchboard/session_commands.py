"""The session commands a chat's user may type (``/new``, ``/reset``, ``/stop``, ``/status``,
``/model [provider:model]``, ``/compact``): recognised where a message comes in (the router for
chat channels, the gateway for WebChat), answered by an agent replica on
``sb.sessions.command`` (never on the lane, never by the model)."""

from __future__ import annotations

import re

COMMANDS = ("new", "reset", "stop", "status", "model", "compact")
MAX_ARGS = 200
# The first word of the text, any case, Telegram's ``/cmd@BotName`` form too, after any
# leading ``@mentions``.
_COMMAND = re.compile(
    r"\s*(?:@\S+\s+)*/(" + "|".join(COMMANDS) + r")(?:@[A-Za-z0-9_]+)?(?:\s+(.*))?",
    re.IGNORECASE | re.DOTALL,
)


def parse(text: str) -> tuple[str, str] | None:
    """``(command, args)`` of a session command in ``text``, None for anything else."""
    found = _COMMAND.fullmatch(text)
    if found is None:
        return None
    return found.group(1).lower(), (found.group(2) or "").strip()[:MAX_ARGS]
