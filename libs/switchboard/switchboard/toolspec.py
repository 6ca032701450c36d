"""One tool contract for the executors' tools and the agent's own (issue 26): a tool's spec is
what the model is offered (name, description, JSON Schema of the arguments) and the groups the
tool declares itself in, which the tool policy's ``group:<name>`` entries and approval rules
match (``switchboard_agent.tools.policy``). ``GROUPS`` is the whole vocabulary: a tool declaring
another group is refused when its registry is built (:func:`check_groups`).

The executors send their specs to the agent as JSON (``sb.tools.specs``): :meth:`ToolSpec.wire`
and :meth:`ToolSpec.from_wire` are both ends of it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

GROUPS: dict[str, str] = {
    "fs": "reads or changes files in the workspace (fs_read and fs_write)",
    "fs_read": "reads files in the workspace",
    "fs_write": "writes or changes files in the workspace",
    "runtime": "runs commands and processes",
    "web": "fetches or searches the web",
    "time": "tells the time",
    "memory": "searches, reads or stores the agent's memory",
    "sessions": "lists, reads, starts or messages other sessions",
    "messaging": "sends messages to chats",
    "automation": "schedules work for later (jobs)",
    "media": "looks at or makes images",
    "mcp": "a tool of an MCP server the operator configured",
    "a2a": "talks to remote A2A agents the operator configured",
}


@dataclass(frozen=True)
class ToolSpec:
    """What the model is offered of one tool, and the groups the tool is in."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the tool input (an object schema)
    groups: tuple[str, ...] = ()

    # Encoded once per spec: every model call of every run carries the schemas (most of a
    # request's bytes), and the specs live as long as the tool catalog.
    @cached_property
    def parameters_json(self) -> str:
        """``parameters`` as compact JSON, as a request body carries them."""
        return json.dumps(self.parameters, ensure_ascii=False, separators=(",", ":"))

    @cached_property
    def chars(self) -> int:
        """The spec's size in characters, for estimating a request's tokens."""
        return len(self.name) + len(self.description) + len(json.dumps(self.parameters))

    def wire(self) -> dict[str, Any]:
        """The JSON object an executor sends for this spec."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "groups": list(self.groups),
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ToolSpec:
        """The spec :meth:`wire` made; without ``groups`` (an executor older than them), none."""
        groups = data.get("groups") or ()
        if isinstance(groups, str) or not all(isinstance(g, str) for g in groups):
            raise ValueError(f"tool {data.get('name')!r}: groups must be a list of names")
        return cls(
            str(data["name"]), str(data["description"]), dict(data["parameters"]), tuple(groups)
        )


def check_groups(spec: ToolSpec) -> None:
    """Refuse a spec declaring a group outside ``GROUPS`` (a typo would leave the tool out of
    every policy entry naming the group it meant)."""
    if isinstance(spec.groups, str):
        raise ValueError(f"tool {spec.name!r}: groups must be a tuple of names, not a string")
    for group in spec.groups:
        if group not in GROUPS:
            known = ", ".join(GROUPS)
            raise ValueError(f"tool {spec.name!r} declares unknown group {group!r}; known: {known}")
