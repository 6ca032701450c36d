"""exec: run a command in the workspace, always inside the sandbox's isolation layers.

Two modes. ``allowlist`` (the default): the command line is split with POSIX ``shlex`` and run
directly, never by a shell. Shell metacharacters are refused outright rather than quoted, so
nothing that looks like a pipeline, redirection, substitution or command list can be smuggled
in. The program must be a bare name from the allowlist (no paths). Path-like arguments must
resolve inside the workspace and a few options known to run programs or change the system are
refused. ``sandbox``: a real ``/bin/sh -c`` -- only offered by a sandbox that enforces
profiles (:class:`~switchboard_tools.sandbox.ProfiledSandbox`), because there the isolation
layers, not argument checks, are the boundary. In both modes a profiled sandbox runs the
command under its layers and the measured attestation is returned in ``details.isolation``;
the allowlist is an extra restriction, never a replacement.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from switchboard_tools.errors import ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput
from switchboard_tools.sandbox import (
    ProcessResult,
    ProfiledSandbox,
    Sandbox,
    SandboxProfile,
    SandboxUnavailable,
)
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

# Shell operators and metacharacters: refused anywhere in the command line, even quoted.
FORBIDDEN_CHARACTERS = frozenset(";|&$`<>(){}\\\n\r")

# Options that run other programs, read lists of file names, or change the system. Long
# options are matched by prefix too, since GNU getopt accepts unambiguous abbreviations.
_DANGEROUS_SHORT: dict[str, frozenset[str]] = {"date": frozenset("s")}
_DANGEROUS_LONG: dict[str, tuple[str, ...]] = {
    "date": ("--set",),
    "sort": ("--compress-program", "--files0-from"),
    "wc": ("--files0-from",),
    "du": ("--files0-from",),
}
# Whole arguments refused (for programs with single-dash long options).
_DANGEROUS_ARGS: dict[str, frozenset[str]] = {
    "find": frozenset(
        {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
    ),
}


def _is_forbidden(ch: str) -> bool:
    return ch in FORBIDDEN_CHARACTERS or (ord(ch) < 32 and ch != "\t") or ord(ch) == 127


def _path_candidates(arg: str) -> list[str]:
    """The parts of an argument that a program may take as a path."""
    if arg in ("-", "--"):
        return []
    if arg.startswith("--"):
        _, eq, value = arg.partition("=")
        return [value] if eq and value else []
    if arg.startswith("-"):
        # Attached value of a short option, e.g. ``-f/etc/passwd``.
        return [arg[2:]] if len(arg) > 2 else []
    return [arg]


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


def check_arguments(argv: list[str], workspace: Path, cwd: Path) -> None:
    """Refuse dangerous options and path arguments that resolve outside the workspace."""
    program = argv[0]
    short = _DANGEROUS_SHORT.get(program, frozenset())
    long = _DANGEROUS_LONG.get(program, ())
    whole = _DANGEROUS_ARGS.get(program, frozenset())
    for arg in argv[1:]:
        if arg in whole:
            raise ToolError(f"Command refused: {arg!r} is not allowed for {program}")
        if arg.startswith("--") and len(arg) > 2:
            name = arg.partition("=")[0]
            if any(option.startswith(name) for option in long):
                raise ToolError(f"Command refused: option {name!r} is not allowed for {program}")
        elif arg.startswith("-") and short.intersection(arg[1:]):
            raise ToolError(f"Command refused: option {arg!r} is not allowed for {program}")
        for value in _path_candidates(arg):
            try:
                resolve_in_workspace(workspace, str(cwd / value))
            except ToolError as exc:
                raise ToolError(
                    f"Command refused: argument {arg!r} points outside the workspace"
                ) from exc


def format_result(
    output: str, *, exit_code: int | None, truncated: bool, timed_out: bool, timeout_s: float
) -> str:
    markers: list[str] = []
    if truncated:
        markers.append("[output truncated]")
    if timed_out:
        markers.append(f"[timed out after {timeout_s:g}s]")
    elif exit_code not in (0, None):
        markers.append(f"[exit code {exit_code}]")
    if not markers:
        return output or "(no output)"
    if output and not output.endswith("\n"):
        output += "\n"
    return output + "\n".join(markers)


def prepare_command(
    args: dict[str, Any], ctx: ToolContext, sandbox: Sandbox, allowlist: frozenset[str]
) -> tuple[list[str], Path]:
    """argv and working directory for ``command``/``mode``/``cwd`` arguments, with every check
    of exec (shared by the process tool)."""
    cwd = resolve_in_workspace(ctx.workspace, args.get("cwd", "."))
    if not cwd.is_dir():
        raise ToolError(f"Working directory {args.get('cwd', '.')!r} is not a directory")
    if args.get("mode", "allowlist") == "sandbox":
        if not isinstance(sandbox, ProfiledSandbox):
            raise SandboxUnavailable(
                "Refused: mode 'sandbox' needs an isolation sandbox and this executor only "
                "has a plain process sandbox; use mode 'allowlist'."
            )
        return ["/bin/sh", "-c", args["command"]], cwd
    argv = parse_command(args["command"], allowlist)
    check_arguments(argv, ctx.workspace, cwd)
    return argv, cwd


class ExecTool(Tool):
    name: ClassVar[str] = "exec"
    description: ClassVar[str] = (
        "Run a command in the workspace, inside the executor's isolation sandbox (no network "
        "unless granted). mode 'allowlist' (default): one command without a shell -- no pipes, "
        "redirections, variables, substitutions or command lists; quote arguments with ' or "
        '"; only allowlisted programs (see the error message for the list); paths must stay '
        "inside the workspace. mode 'sandbox': a full /bin/sh command line. stdout and stderr "
        "are returned together, capped in size."
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
            "mode": {
                "type": "string",
                "enum": ["allowlist", "sandbox"],
                "description": "allowlist (default): one allowlisted program, no shell; "
                "sandbox: a /bin/sh command line.",
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
    group: ClassVar[str] = "runtime"

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        allowlist: Sequence[str] | None = None,
        default_timeout_s: float = DEFAULT_EXEC_TIMEOUT_S,
        output_cap: int = DEFAULT_EXEC_OUTPUT_CAP,
        profile: SandboxProfile | None = None,
    ) -> None:
        """``profile``: the isolation every call demands (default: the sandbox's own)."""
        names = DEFAULT_EXEC_ALLOWLIST if allowlist is None else tuple(allowlist)
        for entry in names:
            if not entry or "/" in entry or any(_is_forbidden(ch) or ch.isspace() for ch in entry):
                raise ValueError(f"invalid exec allowlist entry {entry!r}: use bare program names")
        self.sandbox = sandbox
        self.allowlist = frozenset(names)
        self.default_timeout_s = default_timeout_s
        self.output_cap = output_cap
        self.profile = profile

    def effective_timeout(self, requested: float | None, ctx: ToolContext) -> float:
        timeout = min(requested or self.default_timeout_s, MAX_EXEC_TIMEOUT_S)
        budget = ctx.timeout_s - _TIMEOUT_MARGIN_S
        if budget < timeout:
            timeout = max(budget, ctx.timeout_s / 2)
        return timeout

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        mode = args.get("mode", "allowlist")
        argv, cwd = prepare_command(args, ctx, self.sandbox, self.allowlist)
        requested = args.get("timeout_s")
        timeout_s = self.effective_timeout(float(requested) if requested else None, ctx)
        result = await self._run(argv, cwd, timeout_s, ctx)
        content = format_result(
            result.output,
            exit_code=result.exit_code,
            truncated=result.truncated,
            timed_out=result.timed_out,
            timeout_s=timeout_s,
        )
        return ToolOutput(
            content=content,
            is_error=result.timed_out or result.exit_code != 0,
            details={
                "mode": mode,
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
