"""Sandbox profiles: which isolation layers a call demands, and whether it may use the network."""

from __future__ import annotations

from dataclasses import dataclass, field

from switchboard_tools.errors import ToolError

# Layer names a profile may require (the keys of the attestation that say "in force").
LAYERS: frozenset[str] = frozenset(
    {"process_group", "rlimits", "no_new_privs", "uid", "seccomp", "landlock", "namespaces"}
)


class SandboxUnavailable(ToolError):
    """The profile demands a layer this host cannot provide (or that was not measured in force):
    the call is refused instead of silently running with less isolation."""


@dataclass(frozen=True)
class SandboxProfile:
    """``require``: layers that must be in force, else the call is refused. ``network``: whether
    the command may use the network; ``False`` is itself enforced (a network namespace, the
    seccomp socket rule or Landlock TCP rules) and refused when nothing can enforce it."""

    require: frozenset[str] = field(default_factory=frozenset)
    network: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.require) - LAYERS
        if unknown:
            raise ValueError(f"unknown sandbox layer(s): {', '.join(sorted(unknown))}")

    @classmethod
    def parse(cls, require: str | list[str] | None, network: bool = False) -> SandboxProfile:
        """From configuration: ``"namespaces,seccomp"`` or a list of names."""
        if require is None:
            names: list[str] = []
        elif isinstance(require, str):
            names = [part.strip() for part in require.split(",") if part.strip()]
        else:
            names = list(require)
        return cls(require=frozenset(names), network=network)

    def describe(self) -> dict[str, object]:
        return {"require": sorted(self.require), "network": self.network}


# The default for commands: whatever is strongest on this host, never the network.
DEFAULT_PROFILE = SandboxProfile()
