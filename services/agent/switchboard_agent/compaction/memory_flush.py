"""The memory flush before a compaction: one model call, with the older turns about to be
summarised and the ``memory_store`` tool, asked to store the durable facts among them.

Its calls pass the tool gate like any other: the session's tool policy applies (a session that
may not write memory flushes nothing), and a call an approval rule covers is refused rather
than waited for (a compaction never waits for a person). ``memory_store`` is the memory
service's when memory is configured; without it, :class:`MemoryFileStore` appends the facts to
``memory/YYYY-MM-DD.md`` in the agent's workspace (indexed once memory is configured) — only for
runs of the owner's standing (docs/trust.md), whose memory scope those files are in: a group's or
another person's facts never land in the agent's private files (without the memory service their
flush stores nothing; with it, their facts go to their own scope).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from switchboard import trust
from switchboard.beneath import O_CLOEXEC, open_no_symlinks
from switchboard.toolspec import ToolSpec

from ..approvals.toolgate import ToolGate, ToolRules
from ..memory.tools import MAX_NOTE
from ..providers.base import ModelRequest
from ..runs.turn import text_message
from ..tools.client import CallRequest, CallResult
from ..tools.local import LocalContext, LocalTools, tool_error
from ..tools.policy import Policy

__all__ = ["FLUSH_SYSTEM", "FlushResult", "MemoryFileStore", "flush_request", "store_facts"]

STORE = "memory_store"
FLUSH_SYSTEM = (
    "Memory flush before compaction. The conversation below is about to be replaced in your "
    "context by a short summary. Before that, save every durable fact in it worth knowing in "
    "later conversations (the user's preferences, names, dates, places, decisions, "
    "commitments, open tasks) by calling memory_store once per fact, each a self-contained "
    "statement. Skip small talk and what only mattered for the moment. If nothing is worth "
    "keeping, answer 'nothing to store'. Do not continue the conversation."
)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC


@dataclass(frozen=True)
class FlushResult:
    stored: int = 0  # facts stored
    refused: int = 0  # calls the gate or the tool refused
    to: str = "none"  # memory | file | none


def flush_request(rendered: str, max_tokens: int) -> ModelRequest:
    return ModelRequest(
        system=FLUSH_SYSTEM,
        messages=[text_message("user", f"The conversation so far:\n\n{rendered}")],
        tools=[MemoryFileStore.SPEC],
        max_tokens=max_tokens,
    )


async def store_facts(
    uses: list[dict[str, Any]],
    tools: LocalTools,
    rules: ToolRules,
    ctx: LocalContext,
    policy: Policy,
) -> tuple[int, int]:
    """Run the flush's ``memory_store`` calls through the gate; (stored, refused)."""
    calls = [
        CallRequest(str(u.get("id")), STORE, dict(u.get("input") or {}))
        for u in uses
        if u.get("name") == STORE
    ]
    if not calls:
        return 0, 0

    async def no_events(phase: str, call: CallRequest, data: dict[str, Any]) -> None:
        return None

    async def no_wait() -> None:
        return None

    screened = await ToolGate(rules, None, None, 0).screen(
        run_id=ctx.run_id,
        session_key=ctx.session_key,
        agent=ctx.agent,
        policy=policy,
        calls=calls,
        before_wait=no_wait,
        emit=no_events,
    )
    ran = await tools.run_all(ctx, screened.runnable) if screened.runnable else []
    stored = sum(1 for r in ran if not r.is_error)
    return stored, len(calls) - stored


class MemoryFileStore:
    """``memory_store`` without the memory service: appends to ``memory/YYYY-MM-DD.md`` (the
    day in the agent's time zone) in the agent's workspace, opened beneath the workspace's
    descriptor so a symlink cannot send the write elsewhere."""

    SPEC = ToolSpec(
        STORE,
        "Remember a durable fact for later conversations (a preference, a name, a date, a"
        " decision). One self-contained statement per call.",
        {
            "type": "object",
            "properties": {"text": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE}},
            "required": ["text"],
            "additionalProperties": False,
        },
        groups=("memory",),
    )

    def __init__(self, workspace_root: Path, zone: Callable[[str], ZoneInfo]) -> None:
        self.root = workspace_root
        self.zone = zone

    @property
    def spec(self) -> ToolSpec:
        return self.SPEC

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        if not trust.private_files(ctx.standing):  # the caller checks too: never the agent's
            return tool_error(call, "Memory files are the owner's only.", "not_allowed")
        now = datetime.now(UTC).astimezone(self.zone(ctx.agent))
        text = " ".join(str(call.args["text"]).split())
        line = f"- {text} ({now:%H:%M}, session {ctx.session_key})\n"
        try:
            path = await asyncio.to_thread(self._append, ctx.agent, f"{now:%Y-%m-%d}.md", line)
        except OSError as exc:
            reason = {
                errno.EXDEV: "it leads outside the workspace",
                errno.ELOOP: "it is or passes through a symbolic link",
            }.get(exc.errno or 0, "an error")
            return tool_error(call, f"Could not write the memory file ({reason}).", "write_failed")
        return CallResult(call.call_id, f"Stored in {path}.", False, {"path": path})

    def _append(self, agent: str, name: str, line: str) -> str:
        workspace = self.root / agent
        workspace.mkdir(parents=True, exist_ok=True, mode=0o700)
        dirfd = os.open(workspace, _DIR_FLAGS)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir("memory", 0o700, dir_fd=dirfd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | O_CLOEXEC
            # No symlink at all, not even one inside: memory/ led to a file others read (a
            # group's workspace, AGENTS.md) would hand them the owner's facts.
            fd = open_no_symlinks(dirfd, f"memory/{name}", flags, 0o644)
        finally:
            os.close(dirfd)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line)
        return f"memory/{name}"
