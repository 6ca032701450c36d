"""Tool policy: which tools a run may call. Pure data and functions, no I/O.

Entries (in ``allow``/``deny`` lists, profiles and approval rules) are one of:

- a tool name (``exec``; the aliases ``bash``/``shell`` mean ``exec``, ``apply-patch`` means
  ``apply_patch``);
- a group name ``group:<name>``: the tools whose spec declares that group (a tool declares its
  groups with itself: ``ToolSpec.groups``, the ``groups`` of an executor's ``Tool``; the
  vocabulary is ``switchboard.toolspec.GROUPS``, and an unknown group is a ``PolicyError``);
- a glob where only ``*`` is a wildcard (``memory_*``, ``github__*``); ``?`` and ``[`` are literal.
  Matching is case-sensitive and covers the whole name. Unknown tool names are fine (MCP tools are
  ``server__tool``, each declaring ``mcp``).

A group entry needs the groups of the tool it judges: a :class:`Policy` knows them from the specs
the agent has (:meth:`Policy.knowing`: local tools, plugins', the executors'). It fails closed: a
tool it does not know is matched by every group entry of a ``deny`` list and by none of an
``allow`` list or profile (``deny: ["group:runtime"]`` never lets through a tool because its
groups are unknown).

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
from dataclasses import dataclass, field, replace

from switchboard.sessions import is_subagent
from switchboard.toolspec import GROUPS, ToolSpec

# Tool name -> the groups its spec declares: what group entries are matched against. A name
# missing is a tool the policy does not know (see the module docstring: it fails closed).
Catalogue = Mapping[str, tuple[str, ...]]


def catalogue(specs: Iterable[ToolSpec]) -> dict[str, tuple[str, ...]]:
    """The groups of each tool ``specs`` declare (a later spec wins a name, as a local tool
    shadows an executor's)."""
    return {spec.name: tuple(spec.groups) for spec in specs}


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
    group: str | None = None  # the group a ``group:`` entry names

    @classmethod
    def parse(cls, raw: object, where: str = "entry") -> Entry:
        if not isinstance(raw, str):
            raise PolicyError(f"{where}: expected a tool name string, got {type(raw).__name__}")
        if not raw or raw != raw.strip() or any(ch.isspace() for ch in raw):
            raise PolicyError(f"{where}: {raw!r} is not a tool name (empty or holds whitespace)")
        if raw.startswith("group:"):
            group = raw.removeprefix("group:")
            if group not in GROUPS:
                known = ", ".join(f"group:{name}" for name in GROUPS)
                raise PolicyError(f"{where}: unknown group {raw!r}; known groups: {known}")
            return cls(raw, (), group)
        return cls(raw, (glob_regex(TOOL_ALIASES.get(raw, raw)),))

    def matches(self, tool: str, groups: tuple[str, ...] | None) -> bool:
        """Whether the entry names ``tool``, whose spec declares ``groups`` (``None``: a tool
        not known, which no group entry names)."""
        if self.group is not None:
            return groups is not None and self.group in groups
        return any(p.fullmatch(tool) for p in self._patterns)

    def denies(self, tool: str, groups: tuple[str, ...] | None) -> bool:
        """As a deny entry: fail closed, a tool not known is in every group."""
        return self.matches(tool, groups) or (groups is None and self.group is not None)


def _first_match(
    entries: Iterable[Entry], tool: str, groups: tuple[str, ...] | None
) -> Entry | None:
    return next((e for e in entries if e.matches(tool, groups)), None)


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

    def check(self, tool: str, groups: tuple[str, ...] | None) -> Verdict:
        """Judge ``tool``, whose spec declares ``groups`` (``None``: not known)."""
        denied_by = next((e for e in self._deny if e.denies(tool, groups)), None)
        if denied_by is not None:
            return Verdict(False, "denied", f"deny: {denied_by.text}")
        if self.profile is None and not self.allow:
            return Verdict(True, "allowed", _UNRESTRICTED)
        profile = _PROFILE_ENTRIES[self.profile] if self.profile is not None else ()
        if _first_match(profile, tool, groups):
            return Verdict(True, "allowed", f"profile: {self.profile}")
        allowed_by = _first_match(self._allow, tool, groups)
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
    """Named layers, outermost first; a tool must pass every one. ``catalogue``: the groups of
    the tools the policy knows (:meth:`knowing`); group entries match no other tool but in a
    deny list, where they match every other one."""

    layers: tuple[tuple[str, ToolPolicy], ...] = ()
    catalogue: Catalogue = field(default_factory=dict, hash=False)  # a dict: not hashable

    def knowing(self, specs: Iterable[ToolSpec]) -> Policy:
        """This policy knowing the groups of ``specs`` too (theirs win a name)."""
        return replace(self, catalogue={**self.catalogue, **catalogue(specs)})

    def allows(self, tool: str) -> Decision:
        if not isinstance(tool, str) or not tool:
            return Decision(False, f"{tool!r} is not a tool name")
        groups = self.catalogue.get(tool)
        passed: list[str] = []
        for name, layer in self.layers:
            verdict = layer.check(tool, groups)
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
