"""The shared tool spec: its wire form (executor -> agent over NATS) and the group vocabulary."""

from __future__ import annotations

import json

import pytest

from switchboard.toolspec import GROUPS, ToolSpec, check_groups

SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}}


def test_the_wire_form_round_trips_with_groups() -> None:
    spec = ToolSpec("read", "Read a file.", SCHEMA, ("fs", "fs_read"))
    sent = json.loads(json.dumps(spec.wire()))
    assert sent == {
        "name": "read",
        "description": "Read a file.",
        "parameters": SCHEMA,
        "groups": ["fs", "fs_read"],
    }
    assert ToolSpec.from_wire(sent) == spec


def test_a_spec_without_groups_reads_as_none() -> None:
    older = {"name": "get_time", "description": "Time.", "parameters": SCHEMA}
    assert ToolSpec.from_wire(older).groups == ()
    with pytest.raises(ValueError, match="groups must be a list of names"):
        ToolSpec.from_wire({**older, "groups": "time"})


def test_the_cached_encodings() -> None:
    spec = ToolSpec("t", "d", SCHEMA)
    assert spec.parameters_json == json.dumps(SCHEMA, separators=(",", ":"))
    assert spec.chars == len("t") + len("d") + len(json.dumps(SCHEMA))


def test_groups_outside_the_vocabulary_are_refused() -> None:
    check_groups(ToolSpec("t", "", SCHEMA, tuple(GROUPS)))
    with pytest.raises(ValueError, match="tool 't' declares unknown group 'shell'"):
        check_groups(ToolSpec("t", "", SCHEMA, ("runtime", "shell")))
    with pytest.raises(ValueError, match="not a string"):
        check_groups(ToolSpec("t", "", SCHEMA, "runtime"))  # type: ignore[arg-type]
    assert set(GROUPS) == {
        *("fs", "fs_read", "fs_write", "runtime", "web", "time", "memory", "sessions"),
        *("messaging", "automation", "media", "mcp", "a2a"),
    }
