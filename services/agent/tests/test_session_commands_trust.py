"""Who may use session commands from a chat (docs/trust.md, api/session_commands.py): an owner
anywhere, the person of a direct conversation in it, nobody else in a group; the refusal says
so and nothing of the session is touched (the session's admin is never asked)."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.queue_modes import QueueMode
from switchboard.v1 import sessions_pb2
from switchboard_agent.api.session_commands import NOT_ALLOWED, NOT_ALLOWED_GROUP, SessionCommands

GROUP, DM = "main:telegram:group:-100", "main:telegram:42"


def commands() -> SessionCommands:
    nothing: Any = None  # a refusal, or /compact without a compactor, asks no one
    return SessionCommands(nothing, nothing, QueueMode.QUEUE)


def request(session_key: str, role: str, command: str = "compact") -> sessions_pb2.SessionCommand:
    return sessions_pb2.SessionCommand(
        command=command, sender="telegram:42", session_key=session_key, role=role
    )


@pytest.mark.parametrize(
    ("session_key", "role", "text"),
    [
        (GROUP, "member", NOT_ALLOWED_GROUP),
        (GROUP, "user", NOT_ALLOWED_GROUP),  # a user's stamp does not make a group theirs
        (GROUP, "", NOT_ALLOWED_GROUP),
        (f"{GROUP}:sub:x", "member", NOT_ALLOWED_GROUP),
        (DM, "", NOT_ALLOWED),  # no stamp: the least
        (DM, "member", NOT_ALLOWED),
        (DM, "hook", NOT_ALLOWED),
        ("hook:gh", "user", NOT_ALLOWED),
    ],
)
async def test_refused_with_a_text_saying_who_may(session_key: str, role: str, text: str) -> None:
    for command in ("new", "stop", "model", "compact"):
        answer = await commands().answer(request(session_key, role, command))
        assert (answer.outcome, answer.text) == ("not_allowed", text)
    assert "owners of this assistant" in text


@pytest.mark.parametrize(
    ("session_key", "role"),
    [(GROUP, "owner"), (DM, "owner"), (DM, "user"), ("hook:gh", "owner")],
)
async def test_an_owner_anywhere_and_the_dms_person_in_it(session_key: str, role: str) -> None:
    answer = await commands().answer(request(session_key, role))
    assert answer.outcome == "invalid" and answer.text == "Compaction is not available here."
