"""Errors raised by tools.

A :class:`ToolError` carries a message written for the model: it is returned to the model as an
error result and must never contain secrets or internal details. Any other exception raised by a
tool is treated as an internal error: it is logged and the model only learns that the tool failed.
"""

from __future__ import annotations


class ToolError(Exception):
    """A failure the model may read and react to (bad path, refused command, missing file...)."""

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else "Tool failed"


class ArgumentError(ToolError):
    """The arguments passed the JSON Schema but are still unusable (e.g. an unknown time zone)."""


class McpUnavailable(ToolError):
    """An MCP server could not be reached for a call (not started, crashed, refused by the
    sandbox, connection lost); it is restarted for a later call."""
