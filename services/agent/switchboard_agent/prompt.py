"""System prompt assembly: identity, time, and the agent workspace's bootstrap files."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from pathlib import Path

BOOTSTRAP_FILES = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md")
DIRECT_ONLY = ("MEMORY.md",)
MAX_FILE_CHARS = 20_000

BASE = (
    "You are Switchboard, a personal AI assistant. Answer helpfully and concisely. "
    "Use the tools when they help; tool results are facts about the user's workspace and time."
)


def truncate(text: str, limit: int = MAX_FILE_CHARS) -> str:
    """Keep 70% head and 20% tail of an over-long file, with a marker between."""
    if len(text) <= limit:
        return text
    head, tail = int(limit * 0.7), int(limit * 0.2)
    return (
        f"{text[:head]}\n\n[... {len(text) - head - tail} characters omitted ...]\n\n{text[-tail:]}"
    )


def system_prompt(
    workspace: Path,
    session_key: str,
    direct: bool,
    now: datetime | None = None,
    extra_files: tuple[str, ...] = (),
) -> str:
    """``extra_files``: workspace files this run adds (a heartbeat's ``HEARTBEAT.md``)."""
    now = now or datetime.now(UTC)
    parts = [
        BASE,
        f"Current time: {now.isoformat(timespec='seconds')} (UTC). Session: {session_key}. "
        f"Runtime: Switchboard on {platform.system()}.",
    ]
    names = BOOTSTRAP_FILES + (DIRECT_ONLY if direct else ()) + extra_files
    for name in names:
        path = workspace / name
        if path.is_file():
            parts.append(f"## {name}\n{truncate(path.read_text(errors='replace'))}")
    return "\n\n".join(parts)
