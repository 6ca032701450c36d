from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, ClassVar

import pytest

from switchboard_tools.a2a_settings import A2ASettings
from switchboard_tools.builtin import builtin_registry
from switchboard_tools.errors import ArgumentError, ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.sandbox import ProcessSandbox

SECRET = "hunter2-db-password"


class Echo(Tool):
    name: ClassVar[str] = "echo"
    description: ClassVar[str] = "Echo."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "count": {"type": "integer", "minimum": 1},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}},
                    "required": ["id"],
                },
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content=args["text"] * int(args.get("count", 1)))


class Failing(Tool):
    name: ClassVar[str] = "failing"
    description: ClassVar[str] = "Fails."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"mode": {"type": "string"}},
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.sleeping = asyncio.Event()
        self.cancelled = 0  # sleeps cut short

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        mode = args.get("mode")
        if mode == "tool":
            raise ToolError("the file is locked")
        if mode == "argument":
            raise ArgumentError("'when' must be in the future")
        if mode == "sleep":
            self.sleeping.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if mode == "timeout":
            raise TimeoutError(f"upstream timed out, password={SECRET}")
        raise RuntimeError(f"connection to postgres://admin:{SECRET}@db failed")


@pytest.fixture
def reg() -> ToolRegistry:
    return ToolRegistry([Failing(), Echo()])


async def test_specs_sorted_with_schema(reg: ToolRegistry) -> None:
    specs = reg.specs()
    assert [s.name for s in specs] == ["echo", "failing"]
    assert set(specs[0].wire()) == {"name", "description", "parameters", "groups"}
    specs[0].parameters["properties"].clear()  # a copy: the tool's schema is untouched
    assert "text" in Echo.parameters["properties"]


async def test_builtin_specs_are_valid_closed_objects() -> None:
    reg = builtin_registry(ProcessSandbox())
    specs = reg.specs()
    assert [s.name for s in specs] == [
        "apply_patch",
        "edit",
        "exec",
        "get_time",
        "list_dir",
        "process",
        "read",
        "search_files",
        "web_fetch",
        "web_search",
        "write",
    ]
    for spec in specs:
        assert spec.parameters["type"] == "object"
        assert spec.parameters["additionalProperties"] is False
        assert spec.description
        assert spec.groups, f"{spec.name} declares no group"
    json.dumps([spec.wire() for spec in specs])


async def test_builtin_schemas_are_json_schemas() -> None:
    """The registry checks a schema at its tool's first call, not at start (docs/startup.md,
    third round): a broken built-in schema is caught here instead."""
    from jsonschema import Draft202012Validator

    a2a = A2ASettings(a2a_agents={"peer": {"url": "http://peer"}})  # type: ignore[dict-item]
    reg = builtin_registry(ProcessSandbox(), a2a=a2a)
    assert "a2a_delegate" in reg and "process" in reg
    for spec in reg.specs():
        Draft202012Validator.check_schema(spec.parameters)


async def test_an_invalid_schema_fails_its_calls_only(
    ctx: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(Echo):
        name: ClassVar[str] = "broken"
        parameters: ClassVar[dict[str, Any]] = {"type": "object", "minProperties": "two"}

    reg = ToolRegistry([Broken(), Echo()])
    out = await reg.execute("broken", "{}", ctx)
    assert out.is_error and out.details["error"] == "internal_error"
    assert "tool broken has an invalid parameters schema" in caplog.text
    assert await reg.execute("echo", '{"text": "ok"}', ctx) == ToolOutput(content="ok")


async def test_a_group_outside_the_vocabulary_is_refused() -> None:
    class Typo(Echo):
        groups: ClassVar[tuple[str, ...]] = ("fs", "runtim")

    with pytest.raises(ValueError, match="tool 'echo' declares unknown group 'runtim'"):
        ToolRegistry([Typo()])


async def test_duplicate_tool_names_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        ToolRegistry([Echo(), Echo()])


async def test_valid_call(reg: ToolRegistry, ctx: ToolContext) -> None:
    out = await reg.execute("echo", '{"text": "ab", "count": 2}', ctx)
    assert out == ToolOutput(content="abab")


async def test_unknown_tool_lists_available(reg: ToolRegistry, ctx: ToolContext) -> None:
    out = await reg.execute("rm_rf", "{}", ctx)
    assert out.is_error
    assert "Unknown tool 'rm_rf'" in out.content
    assert "echo, failing" in out.content
    assert out.details["error"] == "unknown_tool"


@pytest.mark.parametrize("bad", ['{"text": ', "not json", "{'text': 'x'}", "NaNx"])
async def test_invalid_json(reg: ToolRegistry, ctx: ToolContext, bad: str) -> None:
    out = await reg.execute("echo", bad, ctx)
    assert out.is_error
    assert out.content.startswith("Invalid arguments for echo: not valid JSON")


@pytest.mark.parametrize(
    ("bad", "kind"),
    [("[1, 2]", "an array"), ('"x"', "a string"), ("null", "null"), ("3", "a number")],
)
async def test_args_must_be_an_object(
    reg: ToolRegistry, ctx: ToolContext, bad: str, kind: str
) -> None:
    out = await reg.execute("echo", bad, ctx)
    assert out.is_error
    assert out.content == f"Invalid arguments for echo: expected a JSON object, got {kind}"


async def test_empty_args_mean_empty_object(reg: ToolRegistry, ctx: ToolContext) -> None:
    out = await reg.execute("echo", "", ctx)
    assert out.is_error
    assert out.content == "Invalid arguments for echo: 'text' is a required property"


async def test_schema_error_names_the_path(reg: ToolRegistry, ctx: ToolContext) -> None:
    out = await reg.execute("echo", '{"text": 123}', ctx)
    assert out.is_error
    assert out.content == "Invalid arguments for echo: at 'text': 123 is not of type 'string'"
    assert out.details == {"error": "invalid_arguments"}


async def test_every_schema_error_is_reported(reg: ToolRegistry, ctx: ToolContext) -> None:
    args = {"text": 1, "count": 0, "items": [{"id": 1}, {"id": "x"}, {}], "extra": True}
    out = await reg.execute("echo", json.dumps(args), ctx)
    assert out.is_error
    msg = out.content
    assert msg.startswith("Invalid arguments for echo: ")
    assert "at 'text': 1 is not of type 'string'" in msg
    assert "at 'count': 0 is less than the minimum of 1" in msg
    assert "at 'items[1].id': 'x' is not of type 'integer'" in msg
    assert "at 'items[2]': 'id' is a required property" in msg
    assert "Additional properties are not allowed ('extra' was unexpected)" in msg
    assert msg.count("; ") == 4


async def test_long_bad_values_are_shortened(reg: ToolRegistry, ctx: ToolContext) -> None:
    out = await reg.execute("echo", json.dumps({"text": ["x" * 5000]}), ctx)
    assert out.is_error
    assert len(out.content) < 400


async def test_boolean_is_not_an_integer(reg: ToolRegistry, ctx: ToolContext) -> None:
    out = await reg.execute("echo", '{"text": "a", "count": true}', ctx)
    assert out.content == "Invalid arguments for echo: at 'count': True is not of type 'integer'"


async def test_tool_error_message_is_returned(reg: ToolRegistry, ctx: ToolContext) -> None:
    out = await reg.execute("failing", '{"mode": "tool"}', ctx)
    assert out == ToolOutput("the file is locked", True, {"error": "tool_error"})


async def test_argument_error_is_prefixed(reg: ToolRegistry, ctx: ToolContext) -> None:
    out = await reg.execute("failing", '{"mode": "argument"}', ctx)
    assert out.is_error
    assert out.content == "Invalid arguments for failing: 'when' must be in the future"


@pytest.mark.parametrize("mode", ["boom", "timeout"])
async def test_internal_errors_are_not_leaked(
    reg: ToolRegistry, ctx: ToolContext, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    with caplog.at_level(logging.ERROR, logger="switchboard_tools.registry"):
        out = await reg.execute("failing", json.dumps({"mode": mode}), ctx)
    assert out.is_error
    assert out.content == "Tool failing failed with an internal error"
    assert SECRET not in out.content and SECRET not in json.dumps(out.details)
    assert out.details == {"error": "internal_error"}
    # ... but the operator gets the traceback.
    assert any(r.exc_info is not None and SECRET in str(r.exc_info[1]) for r in caplog.records)


async def test_timeout_is_enforced(reg: ToolRegistry, ctx: ToolContext) -> None:
    short = ToolContext(**{**ctx.__dict__, "timeout_s": 0.2})
    failing = reg.get("failing")
    assert isinstance(failing, Failing)
    out = await reg.execute("failing", '{"mode": "sleep"}', short)
    assert out.is_error
    assert out.content == "Tool failing timed out after 0.2s"
    assert out.details == {"error": "timeout", "timeout_s": 0.2}
    # The tool's 30 s sleep was cut short by the deadline (without it, the sleep would have
    # ended and the tool failed with an internal error instead).
    assert failing.cancelled == 1


async def test_cancellation_propagates(reg: ToolRegistry, ctx: ToolContext) -> None:
    failing = reg.get("failing")
    assert isinstance(failing, Failing)
    task = asyncio.create_task(reg.execute("failing", '{"mode": "sleep"}', ctx))
    async with asyncio.timeout(10):
        await failing.sleeping.wait()  # the tool runs: the cancel reaches it, not the queue
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert failing.cancelled == 1
