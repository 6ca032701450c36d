"""Tool policy: which tools a run may call. Pure data and functions, no I/O.

Entries (in ``allow``/``deny`` lists, profiles and approval rules) are one of:

- a tool name (``exec``; the aliases ``bash``/``shell`` mean ``exec``, ``apply-patch`` means
  ``apply_patch``);
- a group name ``group:<name>`` (see ``TOOL_GROUPS``; an unknown group is a ``PolicyError``);
- a glob where only ``*`` is a wildcard (``memory_*``, ``github__*``); ``?`` and ``[`` are literal.
  Matching is case-sensitive and covers the whole name. Unknown tool names are fine (MCP tools are
  ``server__tool``; ``group:mcp`` is every name holding ``__``).

Profiles: ``minimal`` = get_time; ``coding`` = fs, runtime, web, time, memory, sessions, media
(``image``); ``messaging`` = message, sessions_list, sessions_history, get_time, web_search, image;
``group`` = fs_read, web, time, memory, media, message (``SB_GROUP_TOOL_PROFILE``'s default, for
group chats: no file writes, no commands, no session tools, no jobs, no MCP or A2A tools);
``full`` = ``*``. Messaging gets no shell, no files and no spawning: it talks, looks things up, and
reads its own sessions.

One layer (``ToolPolicy``) decides like this, in order:

1. ``deny`` always wins: a tool matching any deny entry is denied.
2. With a profile, the tool must be in the profile or match ``allow`` (allow *adds* to the profile).
3. Without a profile, a non-empty ``allow`` *restricts* to the tools it matches; an empty or
   missing ``allow`` means no restriction (to forbid everything, deny ``*``).

Layers stack agent -> session -> group -> sub-agent (``Policy``): a tool is allowed only if every
layer allows it, so a lower layer can only narrow what the layers above allowed. A run of a group's
standing (docs/trust.md) gets the group layer (``SB_GROUP_TOOL_PROFILE``). Sessions whose key holds
``:sub:`` get a sub-agent layer, by default ``deny: DEFAULT_SUBAGENT_DENY``; an explicit sub-agent
policy replaces that default (e.g. to let sub-agents store memory).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from switchboard.sessions import is_subagent

TOOL_GROUPS: dict[str, tuple[str, ...]] = {
    "group:fs": ("read", "write", "edit", "apply_patch", "list_dir", "search_files"),
    "group:fs_write": ("write", "edit", "apply_patch"),
    "group:fs_read": ("read", "list_dir", "search_files"),
    "group:runtime": ("exec", "process"),
    "group:web": ("web_fetch", "web_search"),
    "group:time": ("get_time",),
    "group:memory": ("memory_search", "memory_get", "memory_store"),
    "group:sessions": ("sessions_list", "sessions_history", "sessions_spawn", "sessions_send"),
    "group:messaging": ("message",),
    "group:automation": ("cron",),
    "group:media": ("image",),
    "group:mcp": ("*__*",),
    "group:a2a": ("a2a_delegate",),  # a2a: remote A2A agents the operator configured
}

PROFILES: dict[str, tuple[str, ...]] = {
    "minimal": ("group:time",),
    "coding": (
        "group:fs",
        "group:runtime",
        "group:web",
        "group:time",
        "group:memory",
        "group:sessions",
        "group:media",
    ),
    "messaging": (
        "group:messaging",
        "sessions_list",
        "sessions_history",
        "group:time",
        "web_search",
        "group:media",
    ),
    # Group chats (SB_GROUP_TOOL_PROFILE's default, docs/trust.md): talk, look things up, read
    # the group's own files and memory.
    "group": (
        "group:fs_read",
        "group:web",
        "group:time",
        "group:memory",
        "group:media",
        "group:messaging",
    ),
    "full": ("*",),
}

TOOL_ALIASES: dict[str, str] = {"bash": "exec", "shell": "exec", "apply-patch": "apply_patch"}

DEFAULT_SUBAGENT_DENY: tuple[str, ...] = (
    "sessions_spawn",
    "sessions_send",
    "cron",
    "memory_store",
    "message",
    "a2a_delegate",  # a2a: sub-agents do not talk to other agents outside
)

_CONFIG_KEYS = ("profile", "allow", "deny")
_UNRESTRICTED = "no allow list and no deny entry matches"


class PolicyError(ValueError):
    """A tool policy or approval rule is invalid; the message says what to fix."""


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob in which only ``*`` is special (any run of characters, even empty)."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


@dataclass(frozen=True)
class Entry:
    """One validated policy entry: a tool name, a ``group:`` name or a ``*`` glob."""

    text: str
    _patterns: tuple[re.Pattern[str], ...] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, raw: object, where: str = "entry") -> Entry:
        if not isinstance(raw, str):
            raise PolicyError(f"{where}: expected a tool name string, got {type(raw).__name__}")
        if not raw or raw != raw.strip() or any(ch.isspace() for ch in raw):
            raise PolicyError(f"{where}: {raw!r} is not a tool name (empty or holds whitespace)")
        if raw.startswith("group:"):
            if raw not in TOOL_GROUPS:
                known = ", ".join(TOOL_GROUPS)
                raise PolicyError(f"{where}: unknown group {raw!r}; known groups: {known}")
            members = TOOL_GROUPS[raw]
        else:
            members = (TOOL_ALIASES.get(raw, raw),)
        return cls(raw, tuple(glob_regex(m) for m in members))

    def matches(self, tool: str) -> bool:
        return any(p.fullmatch(tool) for p in self._patterns)


def _first_match(entries: Iterable[Entry], tool: str) -> Entry | None:
    return next((e for e in entries if e.matches(tool)), None)


def _entries(raw: object, where: str) -> tuple[Entry, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str) or not isinstance(raw, list | tuple):
        raise PolicyError(f"{where}: expected a list of tool names, got {type(raw).__name__}")
    return tuple(Entry.parse(item, f"{where}[{i}]") for i, item in enumerate(raw))


_PROFILE_ENTRIES: dict[str, tuple[Entry, ...]] = {
    name: _entries(list(items), f"profile {name}") for name, items in PROFILES.items()
}


@dataclass(frozen=True)
class Verdict:
    """How one layer judged one tool; ``rule`` names the deciding rule for the reason text."""

    allowed: bool
    verb: str
    rule: str


@dataclass(frozen=True)
class ToolPolicy:
    """One policy layer. Build it with ``from_config``/``from_json`` or directly (validated)."""

    profile: str | None = None
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    _allow: tuple[Entry, ...] = field(init=False, repr=False, compare=False)
    _deny: tuple[Entry, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.profile is not None:
            if not isinstance(self.profile, str):
                kind = type(self.profile).__name__
                raise PolicyError(f"profile: expected a string, got {kind}")
            if self.profile not in PROFILES:
                known = ", ".join(PROFILES)
                raise PolicyError(f"profile: unknown profile {self.profile!r}; known: {known}")
        object.__setattr__(self, "_allow", _entries(self.allow, "allow"))
        object.__setattr__(self, "_deny", _entries(self.deny, "deny"))
        object.__setattr__(self, "allow", tuple(self.allow))
        object.__setattr__(self, "deny", tuple(self.deny))

    @classmethod
    def from_config(cls, data: object, where: str = "tools") -> ToolPolicy:
        """Parse ``{"profile": ..., "allow": [...], "deny": [...]}``; ``None`` is no restriction."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise PolicyError(f"{where}: expected an object, got {type(data).__name__}")
        unknown = [str(k) for k in data if k not in _CONFIG_KEYS]
        if unknown:
            raise PolicyError(
                f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                f"expected {', '.join(_CONFIG_KEYS)}"
            )
        try:
            allow = _entries(data.get("allow"), "allow")
            deny = _entries(data.get("deny"), "deny")
            profile = data.get("profile")
            if profile is not None and not isinstance(profile, str):
                raise PolicyError(f"profile: expected a string, got {type(profile).__name__}")
            return cls(profile, tuple(e.text for e in allow), tuple(e.text for e in deny))
        except PolicyError as exc:
            raise PolicyError(f"{where}.{exc}") from None

    @classmethod
    def from_json(cls, text: str, where: str = "tools") -> ToolPolicy:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PolicyError(f"{where}: not valid JSON ({exc})") from None
        return cls.from_config(data, where)

    def to_config(self) -> dict[str, object]:
        out: dict[str, object] = {"allow": list(self.allow), "deny": list(self.deny)}
        if self.profile is not None:
            out["profile"] = self.profile
        return out

    def check(self, tool: str) -> Verdict:
        denied_by = _first_match(self._deny, tool)
        if denied_by is not None:
            return Verdict(False, "denied", f"deny: {denied_by.text}")
        if self.profile is None and not self.allow:
            return Verdict(True, "allowed", _UNRESTRICTED)
        if self.profile is not None and _first_match(_PROFILE_ENTRIES[self.profile], tool):
            return Verdict(True, "allowed", f"profile: {self.profile}")
        allowed_by = _first_match(self._allow, tool)
        if allowed_by is not None:
            return Verdict(True, "allowed", f"allow: {allowed_by.text}")
        listed = [f"profile: {self.profile}"] if self.profile is not None else []
        listed += [f"allow: {', '.join(self.allow)}"] if self.allow else []
        return Verdict(False, "not allowed", f"not in {'; '.join(listed)}")


DEFAULT_SUBAGENT_POLICY = ToolPolicy(deny=DEFAULT_SUBAGENT_DENY)
FULL_POLICY = ToolPolicy(profile="full")


def group_layer(setting: object) -> ToolPolicy:
    """The layer ``SB_GROUP_TOOL_PROFILE`` names for runs of a group's standing (docs/trust.md):
    a profile name, or an object ``{"profile", "allow", "deny"}``; ``setting`` is the value, or
    the agent's settings (their ``group_tool_profile``: what ``switchboard security audit``
    passes). ``full`` is :data:`FULL_POLICY` (no layer at all in a run's policy: the
    behaviour before groups had one). A PolicyError says what to fix."""
    value = getattr(setting, "group_tool_profile", setting)
    where = "group_tool_profile"
    if isinstance(value, str):
        name = value.strip()
        if name.startswith("{"):
            raise PolicyError(f"{where}: not valid JSON ({name[:80]!r})")
        if name not in PROFILES:
            known = ", ".join(PROFILES)
            raise PolicyError(f"{where}: unknown profile {name!r}; known: {known}")
        return ToolPolicy(profile=name)
    return ToolPolicy.from_config(value, where)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


@dataclass(frozen=True)
class Policy:
    """Named layers, outermost first; a tool must pass every one."""

    layers: tuple[tuple[str, ToolPolicy], ...] = ()

    def allows(self, tool: str) -> Decision:
        if not isinstance(tool, str) or not tool:
            return Decision(False, f"{tool!r} is not a tool name")
        passed: list[str] = []
        for name, layer in self.layers:
            verdict = layer.check(tool)
            if not verdict.allowed:
                return Decision(
                    False, f"{tool} is {verdict.verb} by the {name} policy ({verdict.rule})"
                )
            if verdict.rule != _UNRESTRICTED:
                passed.append(f"{name} policy ({verdict.rule})")
        if not passed:
            return Decision(True, f"{tool} is allowed (no tool policy restricts it)")
        return Decision(True, f"{tool} is allowed by the {' and the '.join(passed)}")

    def filter_specs(self, names: Iterable[str]) -> list[str]:
        """The names the policy allows, in their original order."""
        return [name for name in names if self.allows(name).allowed]


def effective_policy(
    agent: ToolPolicy | None,
    session: ToolPolicy | None = None,
    *,
    session_key: str = "",
    subagent: ToolPolicy | None = None,
    group: ToolPolicy | None = None,
) -> Policy:
    """Stack agent -> session -> group (given for a run of a group's standing) -> sub-agent
    (only for ``:sub:`` session keys) into one ``Policy``."""
    layers: list[tuple[str, ToolPolicy]] = []
    if agent is not None:
        layers.append(("agent", agent))
    if session is not None:
        layers.append(("session", session))
    if group is not None:
        layers.append(("group", group))
    if is_subagent(session_key):
        layers.append(("sub-agent", subagent if subagent is not None else DEFAULT_SUBAGENT_POLICY))
    return Policy(tuple(layers))
