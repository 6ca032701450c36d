"""exec: run a command in the workspace, always inside the sandbox's isolation layers.

The operator chooses the mode (``SB_EXEC_MODE``); the caller cannot. ``allowlist`` (the
default): the command line is split with POSIX ``shlex`` and run directly, never by a shell.
Shell metacharacters are refused outright rather than quoted, so nothing that looks like a
pipeline, redirection, substitution or command list can be smuggled in. The program must be a
bare name from the allowlist (no paths), and its arguments are read the way its getopt reads
them (:mod:`switchboard_tools.tools.argcheck`): path-like arguments must resolve inside the
workspace and options known to run programs or change the system are refused, however they are
spelled. ``sandbox``: a real ``/bin/sh -c`` -- only with a sandbox that enforces profiles
(:class:`~switchboard_tools.sandbox.ProfiledSandbox`), because there the isolation layers, not
argument checks, are the boundary. In both modes a profiled sandbox runs the command under its
layers and the measured attestation is returned in ``details.isolation``; the allowlist is an
extra restriction, never a replacement.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from switchboard.toolspec import ToolSpec
from switchboard_tools.errors import ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.sandbox import (
    ProcessResult,
    ProfiledSandbox,
    Sandbox,
    SandboxProfile,
)
from switchboard_tools.tools.argcheck import check_command
from switchboard_tools.workspace import display_path, resolve_in_workspace

DEFAULT_EXEC_ALLOWLIST: tuple[str, ...] = (
    "cat",
    "date",
    "echo",
    "false",
    "grep",
    "head",
    "ls",
    "pwd",
    "sort",
    "tail",
    "true",
    "uname",
    "uniq",
    "wc",
    "whoami",
)
DEFAULT_EXEC_TIMEOUT_S = 30.0
MAX_EXEC_TIMEOUT_S = 300.0
DEFAULT_EXEC_OUTPUT_CAP = 64 * 1024
MAX_COMMAND_LENGTH = 8192
# Left to the sandbox out of the registry's budget so the command's own timeout fires first.
_TIMEOUT_MARGIN_S = 0.5
ExecMode = Literal["allowlist", "sandbox"]
EXEC_MODES: tuple[ExecMode, ...] = ("allowlist", "sandbox")

# Shell operators and metacharacters: refused anywhere in the command line, even quoted.
FORBIDDEN_CHARACTERS = frozenset(";|&$`<>(){}\\\n\r")


def _is_forbidden(ch: str) -> bool:
    return ch in FORBIDDEN_CHARACTERS or (ord(ch) < 32 and ch != "\t") or ord(ch) == 127


def parse_command(command: str, allowlist: frozenset[str]) -> list[str]:
    """Split ``command`` into argv, refusing shell syntax and programs not in ``allowlist``."""
    if len(command) > MAX_COMMAND_LENGTH:
        raise ToolError(f"Command refused: longer than {MAX_COMMAND_LENGTH} characters")
    bad = sorted({ch for ch in command if _is_forbidden(ch)})
    if bad:
        shown = " ".join(repr(ch) for ch in bad)
        raise ToolError(
            f"Command refused: shell operators and metacharacters are not allowed ({shown}). "
            "Run a single command without pipes, redirections, substitutions or command lists."
        )
    try:
        argv = shlex.split(command, posix=True)
    except ValueError as exc:
        raise ToolError(f"Command refused: cannot parse it ({exc})") from exc
    if not argv:
        raise ToolError("Command refused: empty command")
    program = argv[0]
    allowed = ", ".join(sorted(allowlist)) or "(none)"
    if "/" in program:
        raise ToolError(
            f"Command refused: give the program by name, not by path ({program!r}). "
            f"Allowed commands: {allowed}"
        )
    if program not in allowlist:
        raise ToolError(f"Command refused: {program!r} is not allowed. Allowed commands: {allowed}")
    return argv


def format_result(
    output: str,
    *,
    exit_code: int | None,
    truncated: bool,
    timed_out: bool,
    timeout_s: float,
    isolation: dict[str, Any] | None = None,
) -> str:
    markers: list[str] = []
    if truncated:
        markers.append("[output truncated]")
    events = (isolation or {}).get("cgroup_events") or {}
    limits = (isolation or {}).get("cgroup_limits") or {}
    if events.get("oom_kill"):
        markers.append(f"[killed: out of memory (limit {limits.get('memory_max')} bytes)]")
    if events.get("pids_max"):
        markers.append(f"[process limit reached ({limits.get('pids_max')}): forks failed]")
    if timed_out:
        markers.append(f"[timed out after {timeout_s:g}s]")
    elif exit_code not in (0, None):
        markers.append(f"[exit code {exit_code}]")
    if not markers:
        return output or "(no output)"
    if output and not output.endswith("\n"):
        output += "\n"
    return output + "\n".join(markers)


def check_mode(mode: str, sandbox: Sandbox) -> ExecMode:
    """The operator's exec mode, refused at start-up when this sandbox cannot back it."""
    if mode not in EXEC_MODES:
        raise ValueError(f"unknown exec mode {mode!r}: expected allowlist or sandbox")
    if mode == "sandbox" and not isinstance(sandbox, ProfiledSandbox):
        raise ValueError(
            "exec mode 'sandbox' needs a sandbox that enforces isolation profiles; this one "
            "is a plain process sandbox: use mode 'allowlist'"
        )
    return "sandbox" if mode == "sandbox" else "allowlist"


def prepare_command(
    args: dict[str, Any], ctx: ToolContext, mode: ExecMode, allowlist: frozenset[str]
) -> tuple[list[str], Path]:
    """argv and working directory for ``command``/``cwd`` arguments in the operator's ``mode``,
    with every check of exec (shared by the process tool)."""
    cwd = resolve_in_workspace(ctx.workspace, args.get("cwd", "."))
    if not cwd.is_dir():
        raise ToolError(f"Working directory {args.get('cwd', '.')!r} is not a directory")
    if mode == "sandbox":
        return ["/bin/sh", "-c", args["command"]], cwd
    argv = parse_command(args["command"], allowlist)
    check_command(argv, allowlist, ctx.workspace, cwd)
    return argv, cwd


DESCRIPTIONS: dict[ExecMode, str] = {
    "allowlist": "one command without a shell -- no pipes, redirections, variables, "
    "substitutions or command lists; quote arguments with ' or \"; only allowlisted programs "
    "(see the error message for the list); paths must stay inside the workspace",
    "sandbox": "a /bin/sh command line (pipes, redirections and scripts work); writes outside "
    "the workspace are refused",
}


class ExecTool(Tool):
    name: ClassVar[str] = "exec"
    description: ClassVar[str] = (
        "Run a command in the workspace, inside the executor's isolation sandbox (no network; "
        "memory and process limits where the host allows). The command is {mode}. stdout and "
        "stderr are returned together, capped in size."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_COMMAND_LENGTH,
                "description": 'The command line, e.g. "grep -n TODO notes.txt".',
            },
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": MAX_EXEC_TIMEOUT_S,
                "description": f"Timeout in seconds (default {DEFAULT_EXEC_TIMEOUT_S:g}).",
            },
            "cwd": {
                "type": "string",
                "minLength": 1,
                "description": "Working directory, relative to the workspace. Default '.'.",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("runtime",)

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        allowlist: Sequence[str] | None = None,
        default_timeout_s: float = DEFAULT_EXEC_TIMEOUT_S,
        output_cap: int = DEFAULT_EXEC_OUTPUT_CAP,
        profile: SandboxProfile | None = None,
        mode: str = "allowlist",
    ) -> None:
        """``profile``: the isolation every call demands (default: the sandbox's own).
        ``mode``: the operator's choice (``allowlist`` or ``sandbox``, see the module
        docstring); raises ``ValueError`` when this sandbox cannot back it."""
        names = DEFAULT_EXEC_ALLOWLIST if allowlist is None else tuple(allowlist)
        for entry in names:
            if not entry or "/" in entry or any(_is_forbidden(ch) or ch.isspace() for ch in entry):
                raise ValueError(f"invalid exec allowlist entry {entry!r}: use bare program names")
        self.sandbox = sandbox
        self.mode = check_mode(mode, sandbox)
        self.allowlist = frozenset(names)
        self.default_timeout_s = default_timeout_s
        self.output_cap = output_cap
        self.profile = profile

    def spec(self) -> ToolSpec:
        return replace(
            super().spec(), description=self.description.format(mode=DESCRIPTIONS[self.mode])
        )

    def effective_timeout(self, requested: float | None, ctx: ToolContext) -> float:
        timeout = min(requested or self.default_timeout_s, MAX_EXEC_TIMEOUT_S)
        budget = ctx.timeout_s - _TIMEOUT_MARGIN_S
        if budget < timeout:
            timeout = max(budget, ctx.timeout_s / 2)
        return timeout

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        argv, cwd = prepare_command(args, ctx, self.mode, self.allowlist)
        requested = args.get("timeout_s")
        timeout_s = self.effective_timeout(float(requested) if requested else None, ctx)
        result = await self._run(argv, cwd, timeout_s, ctx)
        content = format_result(
            result.output,
            exit_code=result.exit_code,
            truncated=result.truncated,
            timed_out=result.timed_out,
            timeout_s=timeout_s,
            isolation=result.isolation,
        )
        return ToolOutput(
            content=content,
            is_error=result.timed_out or result.exit_code != 0,
            details={
                "mode": self.mode,
                "argv": argv,
                "cwd": display_path(ctx.workspace, cwd),
                "exit_code": result.exit_code,
                "truncated": result.truncated,
                "timed_out": result.timed_out,
                "duration_ms": round(result.duration_ms, 3),
                "timeout_s": timeout_s,
                "isolation": result.isolation or {**self.sandbox.attestation(), "measured": False},
            },
        )

    async def _run(
        self, argv: list[str], cwd: Path, timeout_s: float, ctx: ToolContext
    ) -> ProcessResult:
        if isinstance(self.sandbox, ProfiledSandbox):
            run: Any = self.sandbox.run  # the profiled signature (see ProfiledSandbox)
            result: ProcessResult = await run(
                argv,
                cwd=cwd,
                timeout_s=timeout_s,
                output_cap=self.output_cap,
                on_output=ctx.on_update,
                profile=self.profile,
                workspace=ctx.workspace,
            )
            return result
        return await self.sandbox.run(
            argv, cwd=cwd, timeout_s=timeout_s, output_cap=self.output_cap, on_output=ctx.on_update
        )
