"""Sandbox profiles: which isolation layers a call demands, and whether it may use the network."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from switchboard_tools.errors import ToolError

# Layer names a profile may require (the keys of the attestation that say "in force").
LAYERS: frozenset[str] = frozenset(
    {
        "process_group",
        "rlimits",
        "no_new_privs",
        "uid",
        "seccomp",
        "landlock",
        "namespaces",
        "cgroup",
    }
)
# Either of these confines the command's filesystem to the workspace (and the system
# directories, read-only): the default profile requires one of them.
FS_CONFINEMENT: frozenset[str] = frozenset({"landlock", "namespaces"})
# The layers an operator may switch off for the whole executor (SB_EXEC_DISABLE_LAYERS).
OPTIONAL_LAYERS: frozenset[str] = frozenset({"seccomp", "landlock", "namespaces", "cgroup"})


class SandboxUnavailable(ToolError):
    """The profile demands a layer this host cannot provide (or that was not measured in force):
    the call is refused instead of silently running with less isolation."""


def _check(names: Iterable[str]) -> None:
    unknown = set(names) - LAYERS
    if unknown:
        raise ValueError(
            f"unknown sandbox layer(s): {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(LAYERS))}"
        )


@dataclass(frozen=True)
class SandboxProfile:
    """``require``: layers that must be in force, else the call is refused. ``require_any``:
    groups of layers of which at least one per group must be in force (``landlock|namespaces``:
    filesystem confinement by either). ``network``: whether the command may use the network;
    ``False`` is itself enforced (a network namespace, the seccomp socket rule or Landlock TCP
    rules) and refused when nothing can enforce it."""

    require: frozenset[str] = field(default_factory=frozenset)
    network: bool = False
    require_any: tuple[frozenset[str], ...] = ()

    def __post_init__(self) -> None:
        _check(self.require)
        for group in self.require_any:
            _check(group)
            if not group:
                raise ValueError("an 'any of' sandbox requirement needs at least one layer")

    @classmethod
    def parse(cls, require: str | list[str] | None, network: bool = False) -> SandboxProfile:
        """From configuration: ``"landlock|namespaces,seccomp"`` or a list of such names; ``|``
        joins alternatives (one of them must be in force). ``None`` or ``""``: nothing."""
        if require is None:
            names: list[str] = []
        elif isinstance(require, str):
            names = [part.strip() for part in require.split(",") if part.strip()]
        else:
            names = [name.strip() for name in require]
        single: set[str] = set()
        groups: list[frozenset[str]] = []
        for name in names:
            group = frozenset(alt.strip() for alt in name.split("|") if alt.strip())
            if len(group) == 1:
                single |= group
            elif group and group not in groups:
                groups.append(group)
        return cls(require=frozenset(single), network=network, require_any=tuple(groups))

    def requirements(self) -> list[str]:
        """Every requirement as written in configuration (``a|b`` for alternatives)."""
        alternatives = ["|".join(sorted(group)) for group in self.require_any]
        return sorted(self.require) + sorted(alternatives)

    def describe(self) -> dict[str, object]:
        return {"require": self.requirements(), "network": self.network}


# The default for commands: whatever is strongest on this host, never the network, and always
# filesystem confinement (Landlock or namespaces); a host with neither refuses every command
# unless the operator opts out explicitly (SB_EXEC_REQUIRE).
DEFAULT_REQUIRE = "landlock|namespaces"
DEFAULT_PROFILE = SandboxProfile(require_any=(FS_CONFINEMENT,))
