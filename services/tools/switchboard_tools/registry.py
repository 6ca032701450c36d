"""Tool abstraction and the registry that validates arguments and runs tools safely.

``ToolRegistry.execute`` never raises (except for task cancellation): every failure becomes an
error :class:`ToolOutput` whose content the model may read. Internal exceptions are logged and
hidden from the model.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, ValidationError

from switchboard.toolspec import ToolSpec, check_groups
from switchboard_tools.errors import ArgumentError, ToolError

logger = logging.getLogger(__name__)

# Longest single validation message shown to the model (jsonschema echoes the bad instance).
_MAX_ERROR_MESSAGE = 300
# Most validation errors reported for one call.
_MAX_ERRORS = 20
# Default cap on a call's JSON arguments (UTF-8 bytes): NATS's default max_payload, which a
# ToolCall published on the bus cannot exceed anyway.
DEFAULT_MAX_ARGS_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ToolContext:
    """Who is calling and where: the call's workspace and the time budget for this call.
    ``workspace`` is the agent's or the session's directory (``SB_WORKSPACE_SCOPE``), the same
    for every tool of the call; ``workspace_fd``, when set, is a descriptor of it opened by the
    executor without following symlinks (the file tools resolve every path beneath it; it is
    the executor's and closed after the call: duplicate it to keep it).
    ``workspace_session``: the session whose private workspace ``workspace`` is (``""``: the
    agent's own, ``<root>/<agent>``); whatever else a tool keeps per caller (the process
    tool's handles) is kept per this workspace too, so a private session never reaches what
    the agent's workspace or another session's holds.
    ``on_update``, when set, receives partial output while the tool runs (tools that stream,
    such as exec, call it with coalesced text pieces; the result stays authoritative)."""

    agent: str
    session_key: str
    call_id: str
    workspace: Path
    timeout_s: float
    on_update: Callable[[str], Awaitable[None]] | None = field(
        default=None, compare=False, repr=False
    )
    workspace_fd: int | None = field(default=None, compare=False, repr=False)
    workspace_session: str = ""


@dataclass
class ToolOutput:
    """A tool result. ``details`` must be JSON-serialisable (it travels as ``details_json``)."""

    content: str
    is_error: bool = False
    details: dict[str, Any] = field(default_factory=dict)


class Tool(ABC):
    """A built-in tool. Subclasses set the class attributes and implement :meth:`run`.

    ``parameters`` is a JSON Schema (draft 2020-12) with ``"type": "object"`` and
    ``"additionalProperties": False``; arguments are validated against it before :meth:`run`.
    ``groups``: the policy groups the tool is in (``switchboard.toolspec.GROUPS``), which
    ``group:<name>`` entries of tool policies and approval rules match.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    groups: ClassVar[tuple[str, ...]]

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run with validated ``args``. Raise :class:`ToolError` for failures the model may see."""

    def spec(self) -> ToolSpec:
        """A deep copy of the class's schema: a subclass may fill it in (enums, descriptions)."""
        return ToolSpec(
            self.name, self.description, copy.deepcopy(self.parameters), tuple(self.groups)
        )


def _format_path(error: ValidationError) -> str:
    text = ""
    for part in error.absolute_path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _shorten(text: str, limit: int = _MAX_ERROR_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_validation_errors(errors: Iterable[ValidationError]) -> str:
    """Render every validation error as ``at '<path>': <message>`` (or just the message at the
    top level), sorted by path, joined with ``"; "``."""
    items = sorted(errors, key=lambda e: (e.json_path, e.message))
    parts: list[str] = []
    for error in items[:_MAX_ERRORS]:
        path = _format_path(error)
        message = _shorten(error.message)
        parts.append(f"at '{path}': {message}" if path else message)
    if len(items) > _MAX_ERRORS:
        parts.append(f"and {len(items) - _MAX_ERRORS} more errors")
    return "; ".join(parts)


def _error(content: str, kind: str, **details: Any) -> ToolOutput:
    return ToolOutput(content=content, is_error=True, details={"error": kind, **details})


class ToolRegistry:
    """The tools an executor offers, with argument validation and failure containment."""

    def __init__(self, tools: Iterable[Tool], max_args_bytes: int = DEFAULT_MAX_ARGS_BYTES) -> None:
        """``max_args_bytes``: calls whose JSON arguments are longer (UTF-8) are refused
        before they are parsed."""
        self.max_args_bytes = max_args_bytes
        self._tools: dict[str, Tool] = {}
        # Built at a tool's first call, importing jsonschema then (once per process, 60-100 ms
        # of CPU): with the schemas' checks that was 7 % of the start-up's instructions
        # (docs/startup.md, third round). test_registry.py checks the built-in schemas.
        self._validators: dict[str, Draft202012Validator] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            if tool.parameters.get("type") != "object":
                raise ValueError(f"tool {tool.name!r}: parameters must have type 'object'")
            check_groups(tool.spec())
            self._tools[tool.name] = tool

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[ToolSpec]:
        """The tools' specs sorted by name (their schemas deep copies)."""
        return [self._tools[name].spec() for name in self.names]

    async def execute(self, name: str, args_json: str, ctx: ToolContext) -> ToolOutput:
        """Validate ``args_json`` and run tool ``name`` within ``ctx.timeout_s``. Never raises
        (cancellation of the calling task excepted)."""
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(self.names) or "(none)"
            return _error(
                f"Unknown tool {name!r}. Available tools: {available}", "unknown_tool", tool=name
            )

        size = _utf8_size(args_json, self.max_args_bytes)
        if size > self.max_args_bytes:
            return _error(
                f"Arguments for {name} are too large (more than {self.max_args_bytes} bytes "
                "of JSON per call); nothing was done. Split the work into smaller calls.",
                "arguments_too_large",
                size=size,
                limit=self.max_args_bytes,
            )
        args = self._parse_args(name, args_json)
        if isinstance(args, ToolOutput):
            return args
        try:
            validator = self._validator(name)
        except Exception:
            logger.exception("tool %s has an invalid parameters schema", name)
            return _error(f"Tool {name} failed with an internal error", "internal_error")
        errors = list(validator.iter_errors(args))
        if errors:
            return _error(
                f"Invalid arguments for {name}: {format_validation_errors(errors)}",
                "invalid_arguments",
            )

        # asyncio.timeout (rather than wait_for) tells our deadline apart from a TimeoutError
        # raised inside the tool, which is an internal error like any other.
        deadline = asyncio.timeout(ctx.timeout_s)
        try:
            async with deadline:
                output = await tool.run(args, ctx)
        except TimeoutError:
            if deadline.expired():
                return _error(
                    f"Tool {name} timed out after {ctx.timeout_s:g}s",
                    "timeout",
                    timeout_s=ctx.timeout_s,
                )
            logger.exception("tool %s raised TimeoutError (call_id=%s)", name, ctx.call_id)
            return _error(f"Tool {name} failed with an internal error", "internal_error")
        except ArgumentError as exc:
            message = _without_host_paths(exc.message, ctx.workspace)
            return _error(f"Invalid arguments for {name}: {message}", "invalid_arguments")
        except ToolError as exc:
            return _error(_without_host_paths(exc.message, ctx.workspace), "tool_error")
        except Exception:
            logger.exception(
                "tool %s failed (agent=%s session=%s call_id=%s)",
                name,
                ctx.agent,
                ctx.session_key,
                ctx.call_id,
            )
            return _error(f"Tool {name} failed with an internal error", "internal_error")
        if not isinstance(output, ToolOutput):
            logger.error("tool %s returned %r instead of a ToolOutput", name, type(output))
            return _error(f"Tool {name} failed with an internal error", "internal_error")
        return output

    def _validator(self, name: str) -> Draft202012Validator:
        """Tool ``name``'s argument validator; raises jsonschema's ``SchemaError`` if its
        schema is not a JSON Schema."""
        validator = self._validators.get(name)
        if validator is None:
            from jsonschema import Draft202012Validator

            schema = self._tools[name].parameters
            Draft202012Validator.check_schema(schema)
            validator = self._validators[name] = Draft202012Validator(schema)
        return validator

    @staticmethod
    def _parse_args(name: str, args_json: str) -> dict[str, Any] | ToolOutput:
        # Models sometimes send an empty string for a tool without arguments.
        if args_json is None or (isinstance(args_json, str) and args_json.strip() == ""):
            return {}
        try:
            args = json.loads(args_json)
        except (ValueError, TypeError) as exc:
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "not a JSON string"
            return _error(
                f"Invalid arguments for {name}: not valid JSON ({detail})", "invalid_arguments"
            )
        if not isinstance(args, dict):
            return _error(
                f"Invalid arguments for {name}: expected a JSON object, got {_json_type(args)}",
                "invalid_arguments",
            )
        return args


def _utf8_size(text: object, limit: int) -> int:
    """The UTF-8 length of ``text``; past ``limit`` characters, their number (a lower bound,
    enough to refuse without encoding a huge string)."""
    if not isinstance(text, str):
        return 0
    if len(text) > limit:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _without_host_paths(message: str, workspace: Path) -> str:
    """A last guard for error text: the workspace's absolute path (as given and resolved)
    becomes workspace-relative, so that no message tells the model where the host keeps it."""
    roots = sorted({str(workspace), os.path.realpath(workspace)}, key=len, reverse=True)
    for root in roots:
        if root not in ("", "/") and root in message:
            message = message.replace(root + "/", "").replace(root, ".")
    return message


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
