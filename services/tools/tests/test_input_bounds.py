"""Bounded inputs of the executor (issue 9, item 4): a catastrophic-backtracking pattern cannot
freeze it (search_files uses RE2), and oversized tool arguments are refused before any work."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar

import pytest

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.errors import ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.sandbox import ProcessSandbox

Call = Callable[..., Coroutine[Any, Any, ToolOutput]]
BOUND_S = 30.0  # generous: how long anything here may take before the test calls it frozen


async def test_catastrophic_pattern_does_not_freeze_the_executor(
    call: Call, workspace: Path
) -> None:
    # With a backtracking engine, (a+)+$ on a line of a's that ends in 'b' takes 2^n steps
    # while holding the GIL: the executor's event loop (and every other call) would stop.
    line = "a" * 50_000 + "b\n"
    (workspace / "big.txt").write_text(line * 30)  # ~1.5 MB, under the 2 MiB per-file cap
    (workspace / "note.txt").write_text("still here\n")
    search = asyncio.create_task(
        call("search_files", {"query": "(a+)+$", "regex": True}, timeout_s=BOUND_S)
    )
    try:
        async with asyncio.timeout(BOUND_S):
            other = await call("read", {"path": "note.txt"})
            clock = await call("get_time", {})
    finally:
        async with asyncio.timeout(BOUND_S):
            result = await search
    assert other.content == "still here\n" and not clock.is_error
    assert result.content == "(no matches)" and not result.is_error, result.content
    assert result.details["files_scanned"] == 2
    # The same engine finds what is there.
    out = await call("search_files", {"query": "(a+)+b$", "regex": True, "glob": "big.txt"})
    assert out.details["results"] == 30


@pytest.mark.parametrize(
    ("query", "hint"),
    [
        (r"(a)\1", "backreferences"),
        (r"foo(?=bar)", "lookaround"),
        (r"(?<!x)y", "lookaround"),
        ("(", "missing )"),
        ("a{2000}", "repetition"),
    ],
)
async def test_patterns_re2_refuses_get_clear_errors(call: Call, query: str, hint: str) -> None:
    out = await call("search_files", {"query": query, "regex": True})
    assert out.is_error and out.details["error"] == "invalid_arguments", out.content
    assert "invalid regular expression" in out.content and hint in out.content, out.content


async def test_literal_and_case_insensitive_queries(call: Call, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a (b) [c]\nA (B) [C]\n")
    out = await call("search_files", {"query": "(b) [c]"})  # not a regex: taken literally
    assert out.content == "f.txt:1: a (b) [c]"
    out = await call("search_files", {"query": "(B) [c]", "case_sensitive": False})
    assert out.content.splitlines() == ["f.txt:1: a (b) [c]", "f.txt:2: A (B) [C]"]


class Count(Tool):
    """Counts its runs: a refused call must not reach the tool at all."""

    name: ClassVar[str] = "count"
    description: ClassVar[str] = "Counts."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.runs += 1
        return ToolOutput(content=str(len(args.get("text", ""))))


async def test_oversized_arguments_are_refused_before_any_work(ctx: ToolContext) -> None:
    tool = Count()
    registry = ToolRegistry([tool], max_args_bytes=4096)
    fits = json.dumps({"text": "é" * 2000}, ensure_ascii=False)  # 4012 bytes: fits
    assert len(fits.encode()) <= 4096
    out = await registry.execute("count", fits, ctx)
    assert not out.is_error and out.content == "2000" and tool.runs == 1
    for args in [
        json.dumps({"text": "é" * 2100}, ensure_ascii=False),
        json.dumps({"text": "x" * 10_000}),
        "[" * 5000,
    ]:
        out = await registry.execute("count", args, ctx)
        assert out.is_error and out.details["error"] == "arguments_too_large", out.content
        assert "too large (more than 4096 bytes" in out.content
    assert tool.runs == 1


async def test_builtin_write_cap(ctx: ToolContext, workspace: Path) -> None:
    registry = builtin_registry(ProcessSandbox(), max_args_bytes=64 * 1024)
    big = json.dumps({"path": "big.txt", "content": "x" * 100_000})
    out = await registry.execute("write", big, ctx)
    assert out.is_error and out.details == {
        "error": "arguments_too_large",
        "size": len(big),
        "limit": 64 * 1024,
    }
    assert not (workspace / "big.txt").exists()
    out = await registry.execute("write", json.dumps({"path": "ok.txt", "content": "x"}), ctx)
    assert not out.is_error


class Leaky(Tool):
    name: ClassVar[str] = "leaky"
    description: ClassVar[str] = "Raises a ToolError naming an absolute path."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "additionalProperties": False}
    groups: ClassVar[tuple[str, ...]] = ()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise ToolError(f"cannot open {ctx.workspace}/sub/f.txt in {ctx.workspace}")


async def test_tool_errors_lose_the_workspace_path(ctx: ToolContext) -> None:
    out = await ToolRegistry([Leaky()]).execute("leaky", "{}", ctx)
    assert out.content == "cannot open sub/f.txt in ."
