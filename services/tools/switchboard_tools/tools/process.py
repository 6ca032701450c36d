"""process: start a long-running command, then poll its output, kill it, list processes.

The command is checked and run exactly like exec (in the operator's exec mode, allowlist or
sandbox, under the same sandbox layers), but left running: ``start`` returns a handle,
``poll`` returns the output that arrived since the previous poll and whether it still runs,
``kill`` ends its whole process group. Works from any executor replica (see
:mod:`switchboard_tools.procs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from switchboard.toolspec import ToolSpec
from switchboard_tools.errors import ArgumentError
from switchboard_tools.procs import ProcessManager, wait_for_event
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.tools.exec import (
    DEFAULT_EXEC_ALLOWLIST,
    DESCRIPTIONS,
    MAX_COMMAND_LENGTH,
    check_mode,
    prepare_command,
)
from switchboard_tools.workspace import display_path

MAX_WAIT_S = 60.0
DEFAULT_START_WAIT_S = 1.0
# Left out of the call's time budget when waiting: room for forwarding to the owning replica
# (see switchboard_tools.procbus.ANSWER_TIMEOUT_S) before the registry's deadline.
_WAIT_MARGIN_S = 6.0


def _state(item: dict[str, Any]) -> str:
    status, runtime = item["status"], float(item["runtime_s"])
    if status == "running":
        return f"running for {runtime:.1f}s"
    if status == "killed":
        return f"killed after {runtime:.1f}s"
    if status == "timed_out":
        return f"killed at its lifetime limit ({float(item['lifetime_s']):g}s)"
    return f"exited with code {item['exit_code']} after {runtime:.1f}s"


def format_output(item: dict[str, Any]) -> str:
    lines = [f"[{item['handle']} {_state(item)}]"]
    if item.get("dropped_bytes"):
        lines.append(f"[{item['dropped_bytes']} bytes of output were dropped before this]")
    output = item.get("output", "")
    lines.append(output.rstrip("\n") if output else "(no new output)")
    return "\n".join(lines)


def format_list(items: list[dict[str, Any]]) -> str:
    if not items:
        return "No processes."
    return "\n".join(f"{i['handle']}  {_state(i)}  {i['command']}" for i in items)


class ProcessTool(Tool):
    name: ClassVar[str] = "process"
    description: ClassVar[str] = (
        "Long-running commands (servers, watchers, builds). action 'start': run `command` "
        "like exec (same sandbox; the command is {mode}) but in the background; returns a "
        "handle and the "
        "first output (waits up to wait_s, default 1). 'poll' with `handle`: output since the "
        "last poll and whether it still runs (wait_s: wait up to that long for new output). "
        "'kill' with `handle`: end it and everything it started. 'list': the processes of "
        "this workspace. "
        "Output is kept in a ring buffer (older output may be dropped); processes end at "
        "their lifetime limit."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["start", "poll", "kill", "list"]},
            "command": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_COMMAND_LENGTH,
                "description": "start: the command line (as for exec).",
            },
            "cwd": {
                "type": "string",
                "minLength": 1,
                "description": "start: working directory, relative to the workspace.",
            },
            "handle": {
                "type": "string",
                "pattern": "^p_[A-Za-z0-9-]+_[0-9]+$",
                "description": "poll/kill: the handle returned by start.",
            },
            "wait_s": {
                "type": "number",
                "minimum": 0,
                "maximum": MAX_WAIT_S,
                "description": "start/poll: wait up to this many seconds for output.",
            },
            "lifetime_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "start: kill it after this many seconds (capped by the executor).",
            },
        },
        "required": ["action"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("runtime",)

    def __init__(
        self,
        manager: ProcessManager,
        *,
        allowlist: Sequence[str] | None = None,
        mode: str = "allowlist",
    ) -> None:
        """``mode``: the operator's exec mode (see :mod:`switchboard_tools.tools.exec`)."""
        self.manager = manager
        self.mode = check_mode(mode, manager.sandbox)
        names = DEFAULT_EXEC_ALLOWLIST if allowlist is None else tuple(allowlist)
        self.allowlist = frozenset(names)

    def spec(self) -> ToolSpec:
        return replace(
            super().spec(), description=self.description.format(mode=DESCRIPTIONS[self.mode])
        )

    def _wait(self, args: dict[str, Any], ctx: ToolContext, default: float) -> float:
        wanted = float(args.get("wait_s", default))
        return max(0.0, min(wanted, MAX_WAIT_S, ctx.timeout_s - _WAIT_MARGIN_S))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        action = args["action"]
        allowed = {
            "start": {"command", "cwd", "wait_s", "lifetime_s"},
            "poll": {"handle", "wait_s"},
            "kill": {"handle"},
            "list": set(),
        }[action]
        extra = sorted(set(args) - allowed - {"action"})
        if extra:
            raise ArgumentError(f"action {action!r} does not take {', '.join(extra)}")
        if action == "start":
            return await self._start(args, ctx)
        if action == "list":
            items = await self.manager.list_all(ctx.agent, ctx.workspace_session)
            return ToolOutput(format_list(items), details={"processes": items})
        if "handle" not in args:
            raise ArgumentError(f"action {action!r} needs a handle")
        wait_s = self._wait(args, ctx, 0.0) if action == "poll" else 0.0
        item = await self.manager.request(
            action, ctx.agent, args["handle"], wait_s, ctx.workspace_session
        )
        return ToolOutput(format_output(item), details=item)

    async def _start(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if "command" not in args:
            raise ArgumentError("action 'start' needs a command")
        argv, cwd = prepare_command(args, ctx, self.mode, self.allowlist)
        managed = await self.manager.start(
            ctx.agent,
            argv,
            cwd=cwd,
            workspace=ctx.workspace,
            command=args["command"],
            mode=self.mode,
            shown_cwd=display_path(ctx.workspace, cwd),
            lifetime_s=args.get("lifetime_s"),
            scope=ctx.workspace_session,
        )
        wait_s = self._wait(args, ctx, DEFAULT_START_WAIT_S)
        item = await self.manager.poll_local(ctx.agent, managed.handle, 0.0, managed.scope)
        if wait_s > 0 and managed.running:
            # Let quick commands finish and slow ones show their first output.
            await wait_for_event(managed.child.finished, wait_s)
            later = await self.manager.poll_local(ctx.agent, managed.handle, 0.0, managed.scope)
            later["output"] = item["output"] + later["output"]
            later["dropped_bytes"] += item["dropped_bytes"]
            item = later
        item["isolation"] = managed.child.isolation or {
            **self.manager.sandbox.attestation(),
            "measured": False,
        }
        failed = item["status"] == "exited" and item["exit_code"] != 0
        return ToolOutput(format_output(item), is_error=failed, details=item)
