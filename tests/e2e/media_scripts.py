"""The fake model's script for the tests of files sent back (test_media_send.py,
test_media_slack.py, test_media_webchat.py): an image in the turn is sent back with the
``message`` tool; "send <ref> to <target>" sends that reference there; after the tool call the
answer quotes its result."""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.llm import FakeRequest, Reply

IMAGE_NOTE = re.compile(r"\[image (media:[^\]\s]+)\]")


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [str(p.get("text", "")) for p in content or [] if isinstance(p, dict)]


def image_notes(req: FakeRequest) -> list[str]:
    """The ``media:`` references the last user message shows next to its images."""
    users = [m for m in req.messages if m.get("role") == "user"]
    return [n for t in _texts(users[-1]) for n in IMAGE_NOTE.findall(t)] if users else []


def send_back(req: FakeRequest) -> Reply:
    if req.last_tool_results:
        return Reply(text="done: " + " | ".join(req.last_tool_results))
    notes = image_notes(req)
    if notes:
        return Reply(tool_calls=[("message", {"text": "here it is", "media": notes})])
    words = req.last_user_text.split()
    if len(words) == 4 and words[0] == "send" and words[2] == "to":
        args = {"text": "for the ops channel", "media": [words[1]], "to": words[3]}
        return Reply(tool_calls=[("message", args)])
    return Reply(text="hello")
