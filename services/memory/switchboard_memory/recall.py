"""How texts are put into words for retrieval: the query as searched, and the text indexed for
a session turn (its date and speakers, as the LoCoMo measurements showed they matter)."""

from __future__ import annotations

from datetime import UTC, datetime


def compose_query(query: str) -> str:
    return query.strip()


def compose_turn(user_text: str, assistant_text: str, at_ms: int) -> str:
    """A finished turn as one entry: ``[date] user: ... / assistant: ...``."""
    when = datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%-d %B %Y") if at_ms else ""
    lines = []
    if user_text.strip():
        lines.append(f"user: {user_text.strip()}")
    if assistant_text.strip():
        lines.append(f"assistant: {assistant_text.strip()}")
    body = "\n".join(lines)
    return f"[{when}] {body}" if when else body


def compose_utterance(speaker: str, text: str, when: str, previous: str = "") -> str:
    """One person's message as indexed: ``[date] speaker: text``; ``previous`` (the message it
    answers) is appended as context, since a reply alone is often ambiguous."""
    body = f"[{when}] {speaker}: {text.strip()}" if when else f"{speaker}: {text.strip()}"
    return f"{body}\n(replying to {previous.strip()})" if previous else body
