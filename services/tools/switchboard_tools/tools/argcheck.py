"""exec's argument checks in allowlist mode, reading a command line the way the program will.

Options are parsed as GNU getopt parses them (:mod:`.argspecs` declares each known program's):
clusters of short flags (``-us``), values attached or in the next argument (``-o/tmp/x``,
``-uo /tmp/x``), optional values only attached (``-Iseconds``), ``--`` ending the options,
long options abbreviated to any unambiguous prefix (``--compress=sh``), ``--name=value`` or
``--name value``, and options after operands (GNU permutes), except for programs that run
another program, whose options stop at the first operand. Then:

- a refused option (``date -s``, ``sort --compress-program``) refuses the command;
- an option unknown to the program's declaration, an ambiguous abbreviation, or a missing
  value refuses it (the program would reject it too; guessing would let values slip through);
- every path-valued option and every operand must resolve inside the workspace;
- a program that runs another (``env``, ``nice``, ``timeout``, ``xargs``...) is only allowed
  to run an allowlisted program, checked in turn.

Programs the allowlist holds but :mod:`.argspecs` does not know are checked conservatively:
every operand, every ``--name=value`` value and every tail of a short-option cluster (wherever
an attached value could start) must resolve inside the workspace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from switchboard_tools.errors import ToolError
from switchboard_tools.tools.argspecs import DENY, PATH, SPECS, Opt, Spec
from switchboard_tools.workspace import resolve_in_workspace

# Whole arguments refused (for programs with single-dash long options).
DANGEROUS_ARGS: dict[str, frozenset[str]] = {
    "find": frozenset(
        {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
    ),
}
# How deep programs may wrap programs (env nice timeout ...).
_MAX_WRAPPING = 4
# Variables ``env NAME=VALUE cmd`` may not set: they make the program load or run other code,
# or find another program under its name.
_UNSAFE_VARIABLES = re.compile(
    r"PATH|LD_.*|GCONV_PATH|LOCPATH|NLSPATH|GLIBC_TUNABLES|MALLOC_.*|HOSTALIASES|BASH_ENV|ENV"
    r"|SHELLOPTS|BASHOPTS|PS4|IFS|PYTHON.*|PERL.*|RUBY.*|NODE_.*|JAVA_TOOL_OPTIONS|_JAVA_.*"
)

Found = tuple[str, Opt, str | None]  # (option as written, its declaration, its value)


class _Parsed:
    def __init__(self) -> None:
        self.options: list[Found] = []
        self.operands: list[str] = []


def _refuse(text: str) -> ToolError:
    return ToolError(f"Command refused: {text}")


def _long_option(program: str, spec: Spec, name: str) -> tuple[str, Opt]:
    if name in spec.long:
        return name, spec.long[name]
    matches = sorted(option for option in spec.long if option.startswith(name))
    if len(matches) == 1:
        return matches[0], spec.long[matches[0]]
    if matches:
        shown = ", ".join(f"--{m}" for m in matches)
        raise _refuse(f"option '--{name}' of {program} is ambiguous ({shown})")
    raise _refuse(f"{program} has no option '--{name}' that exec knows")


def parse(program: str, argv: list[str], spec: Spec) -> _Parsed:
    """Options and operands of ``argv`` (without the program) as getopt sees them."""
    parsed = _Parsed()
    if spec.operands == "text":  # the program parses no options (echo, true, sleep)
        parsed.operands = list(argv)
        return parsed
    args = iter(argv)

    def value_of(shown: str) -> str:
        value = next(args, None)
        if value is None:
            raise _refuse(f"option {shown!r} of {program} needs a value")
        return value

    for arg in args:
        if arg == "--":
            parsed.operands += list(args)
        elif arg.startswith("--"):
            name, eq, attached = arg[2:].partition("=")
            full, opt = _long_option(program, spec, name)
            shown = f"--{full}"
            if opt.takes == "none" and eq:
                raise _refuse(f"option {shown!r} of {program} takes no value")
            value = attached if eq else None
            if opt.takes == "required" and not eq:
                value = value_of(shown)
            parsed.options.append((shown, opt, value))
        elif arg.startswith("-") and arg != "-":
            _short_cluster(program, spec, arg, parsed, value_of)
        else:
            parsed.operands.append(arg)
            if spec.wrap is not None:  # options stop at the first operand
                parsed.operands += list(args)
    return parsed


def _short_cluster(
    program: str, spec: Spec, arg: str, parsed: _Parsed, value_of: Callable[[str], str]
) -> None:
    i = 1
    while i < len(arg):
        letter = arg[i]
        if spec.digits and letter.isdigit():
            i += 1
            continue
        opt = spec.short.get(letter)
        if opt is None:
            raise _refuse(f"{program} has no option '-{letter}' that exec knows (in {arg!r})")
        rest = arg[i + 1 :]
        if opt.takes == "none":
            parsed.options.append((f"-{letter}", opt, None))
            i += 1
            continue
        if opt.takes == "optional":
            parsed.options.append((f"-{letter}", opt, rest or None))
        else:
            parsed.options.append((f"-{letter}", opt, rest or value_of(f"-{letter}")))
        return


def _generic_candidates(arg: str) -> Iterator[str]:
    """What a program of unknown options may take as a path in ``arg``."""
    if arg in ("-", "--"):
        return
    if arg.startswith("--"):
        _, eq, value = arg.partition("=")
        if eq and value:
            yield value
    elif arg.startswith("-"):
        for i in range(2, len(arg)):  # an attached value may start after any letter
            yield arg[i:]
    else:
        yield arg


def check_paths(arg: str, values: Iterator[str] | list[str], workspace: Path, cwd: Path) -> None:
    for value in values:
        try:
            resolve_in_workspace(workspace, str(cwd / value))
        except ToolError as exc:
            raise _refuse(f"argument {arg!r} points outside the workspace") from exc


def check_command(
    argv: list[str], allowlist: frozenset[str], workspace: Path, cwd: Path, depth: int = 0
) -> None:
    """Refuse ``argv`` unless its program is allowlisted (by bare name) and its arguments pass
    the checks of the module docstring."""
    if not argv:
        raise _refuse("empty command")
    program = argv[0]
    allowed = ", ".join(sorted(allowlist)) or "(none)"
    if "/" in program:
        raise _refuse(
            f"give the program by name, not by path ({program!r}). Allowed commands: {allowed}"
        )
    if program not in allowlist:
        raise _refuse(f"{program!r} is not allowed. Allowed commands: {allowed}")
    whole = DANGEROUS_ARGS.get(program, frozenset())
    for arg in argv[1:]:
        if arg in whole:
            raise _refuse(f"{arg!r} is not allowed for {program}")
    spec = SPECS.get(program)
    if spec is None:
        for arg in argv[1:]:
            check_paths(arg, _generic_candidates(arg), workspace, cwd)
        return
    parsed = parse(program, argv[1:], spec)
    for shown, opt, value in parsed.options:
        if opt.kind == DENY:
            raise _refuse(f"option {shown!r} is not allowed for {program}")
        if opt.kind == PATH and value is not None:
            check_paths(f"{shown} {value}", [value], workspace, cwd)
    operands = parsed.operands
    if spec.wrap is not None:
        operands = _wrapped(program, spec.wrap, operands)
        if operands:
            if depth >= _MAX_WRAPPING:
                raise _refuse(f"{program} wraps too many programs")
            check_command(operands, allowlist, workspace, cwd, depth + 1)
        return
    for operand in operands:
        if spec.operands == "date" and not operand.startswith("+"):
            raise _refuse(f"{program} {operand!r} would set the clock; give +FORMAT instead")
        check_paths(operand, [operand], workspace, cwd)


def _wrapped(program: str, wrap: str, operands: list[str]) -> list[str]:
    """The command a wrapper runs, given the operands after its options."""
    if wrap == "env":
        while operands and "=" in operands[0]:
            name = operands[0].partition("=")[0]
            if _UNSAFE_VARIABLES.fullmatch(name):
                raise _refuse(f"{program} may not set {name}")
            operands = operands[1:]
    elif wrap == "timeout":
        if not operands:
            raise _refuse(f"{program} needs a duration and a command")
        operands = operands[1:]
    return operands
