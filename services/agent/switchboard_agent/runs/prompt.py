"""System prompt assembly: identity, the agent workspace's bootstrap files, its skills (names and
descriptions, :mod:`..workspace.skills`), then the runtime facts of this run (time in the agent's
time zone, model, channel, session kind).

The prompt is built stable part first: the identity and the files change only when someone
edits a file, the runtime part changes every run. :attr:`Prompt.stable_chars` marks the
boundary, so a provider can cache the stable prefix (Anthropic's ``cache_control``; OpenAI
caches long identical prefixes by itself)."""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from switchboard import trust
from switchboard.trust import Standing

from ..workspace.files import WorkspaceFiles, files_for

BASE = (
    "You are Switchboard, a personal AI assistant. Answer helpfully and concisely. "
    "Use the tools when they help; tool results are facts about the user's workspace and time."
)
FILES_HEADING = (
    "# Workspace files (injected)\n"
    "These user-editable files from your workspace are loaded into every conversation; "
    "change them with the file tools to change how you work."
)


# What the runtime section says of each standing (docs/trust.md).
STANDINGS = {
    Standing.OWNER: "a conversation of your owner",
    Standing.PERSONAL: "a conversation with someone who is not your owner: the owner's private"
    " files and memory are not available, and this conversation's files are its own",
    Standing.GROUP: "a group chat: the owner's private files and memory are not available, and"
    " the tools are limited",
}


@dataclass(frozen=True)
class Prompt:
    text: str
    stable_chars: int  # text[:stable_chars] is the same from run to run while no file changes


@dataclass(frozen=True)
class RunFacts:
    """What the runtime section says about this run."""

    agent: str
    session_key: str
    kind: str  # session kind (workspace_files.session_kind)
    channel: str
    model: str  # provider:model
    heartbeat: bool = False
    standing: Standing = Standing.PERSONAL  # docs/trust.md: the owner's private files or not


class PromptBuilder:
    def __init__(
        self,
        files: WorkspaceFiles,
        timezone: str = "UTC",
        agent_timezones: dict[str, str] | None = None,
        skills: Callable[[str], str] | None = None,
    ) -> None:
        self.files = files
        self.timezone = timezone
        self.agent_timezones = agent_timezones or {}
        self.skills = skills  # an agent's skills section (workspace/skills.py), "" : none

    def zone(self, agent: str) -> ZoneInfo:
        return ZoneInfo(self.agent_timezones.get(agent) or self.timezone)

    def build(self, facts: RunFacts, now: datetime | None = None) -> Prompt:
        names = files_for(facts.kind, facts.heartbeat, trust.private_files(facts.standing))
        loaded = self.files.load(facts.agent, names)
        stable = [BASE]
        if loaded:
            stable.append(FILES_HEADING)
            stable.extend(f"## {name}\n{text}" for name, text in loaded)
        if self.skills is not None and (section := self.skills(facts.agent)):
            stable.append(section)
        head = "\n\n".join(stable) + "\n\n"
        return Prompt(head + self.runtime(facts, now), len(head))

    def runtime(self, facts: RunFacts, now: datetime | None = None) -> str:
        zone = self.zone(facts.agent)
        local = (now or datetime.now(UTC)).astimezone(zone)
        offset = local.strftime("%z")
        return (
            "# Runtime\n"
            f"Current time: {local.strftime('%A %Y-%m-%d %H:%M')} in {zone.key} "
            f"(UTC{offset[:3]}:{offset[3:]}).\n"
            f"Agent: {facts.agent}. Model: {facts.model}. Channel: {facts.channel or 'none'}. "
            f"Session: {facts.session_key} ({facts.kind}"
            f"{', heartbeat run' if facts.heartbeat else ''}).\n"
            f"Standing: {facts.standing} ({STANDINGS[facts.standing]}).\n"
            f"Host: Switchboard on {platform.system()}."
        )
