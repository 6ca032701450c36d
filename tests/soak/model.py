"""What the fake model answers in the campaign, and the marks the checker reads back.

Every message the traffic sends carries a marker (``sk000123a``); the model's final answer
names the markers of the message it answers (``ANSWER sk000123a``), so each reply on each
platform, each transcript row and each OpenAI response can be traced to exactly one message.
A scheduled job's run is answered ``ANSWER cron <job> <due time>``: one answer per slot."""

from __future__ import annotations

import re

from tests.fakes.llm import FakeRequest, Reply

MARKER = re.compile(r"\bsk\d{6}[a-z]\b")
ANSWERED = re.compile(r"ANSWER((?: sk\d{6}[a-z])+)")
CRON_ASKED = re.compile(r"\[Scheduled job '([^']+)', due ([0-9TZ:.-]+)\]")
CRON_ANSWERED = re.compile(r"ANSWER cron (\S+) ([0-9TZ:.-]+)")
TOOL_WORD = "use-tool"
REMEMBER_WORD = "remember-this"


def marker(n: int) -> str:
    return f"sk{n:06d}a"


def fact(mark: str) -> str:
    """What a ``remember`` message has the model store (and the checker search for)."""
    return f"soak fact {mark} kept"


def script(req: FakeRequest) -> Reply:
    text = req.last_user_text
    cron = CRON_ASKED.search(text)
    if cron:
        return Reply(text=f"ANSWER cron {cron.group(1)} {cron.group(2)}")
    marks = " ".join(MARKER.findall(text))
    if req.last_tool_results or not marks:
        return Reply(text=f"ANSWER {marks}".rstrip())
    if TOOL_WORD in text:
        return Reply(tool_calls=[("get_time", {"timezone": "UTC"})])
    if REMEMBER_WORD in text:
        return Reply(tool_calls=[("memory_store", {"text": fact(marks)})])
    return Reply(text=f"ANSWER {marks}")
