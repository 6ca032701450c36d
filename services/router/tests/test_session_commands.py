"""Recognising the session commands (/new, /reset, /stop, /status, /model, /compact) in a
chat's text: the first word, any case, Telegram's ``/cmd@Bot`` form, after leading @mentions;
anything else (another command, a command later in the text) is an ordinary message."""

from __future__ import annotations

import pytest

from switchboard_router.session_commands import parse


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/new", ("new", "")),
        ("/RESET", ("reset", "")),
        ("  /stop  ", ("stop", "")),
        ("/status@SwitchboardBot", ("status", "")),
        ("@bot /model openai:gpt-4o", ("model", "openai:gpt-4o")),
        ("/model", ("model", "")),
        ("/model  default ", ("model", "default")),
        ("/Compact@SwitchboardBot", ("compact", "")),
    ],
)
def test_session_commands_are_recognised(text: str, parsed: tuple[str, str]) -> None:
    assert parse(text) == parsed


@pytest.mark.parametrize(
    "text",
    ["/approve abc123", "please /reset", "/newsletter", "/stopwatch", "/compaction", "reset", ""],
)
def test_other_text_is_not_a_session_command(text: str) -> None:
    assert parse(text) is None
