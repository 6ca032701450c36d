"""Command lines as approval rules see them: every program a command would run, with its
arguments, however it is spelled. Pure, no I/O.

A command (exec's ``command``, or the process tool's) is split into simple commands at shell
operators (``;``, ``&&``, ``||``, ``|``, ``&``, newlines, parentheses) with POSIX quoting, so
``ls; rm x`` yields ``ls`` and ``rm x``. In each, leading ``NAME=value`` assignments and shell
keywords are skipped, the program is reduced to its name (``/bin/rm`` -> ``rm``) and programs
that run other programs are unwrapped: ``env``, ``nice``, ``timeout``, ``nohup``, ``stdbuf``,
``xargs``, ``time``, ``command``, ``exec``, ``sudo``, ``doas``, ``setsid``, ``ionice``,
``chrt``, ``taskset``, ``flock``, ``busybox``, ``find -exec``, and shells' ``-c`` strings
(``sh -c 'rm x'``). Each program found gives a *form*: ``rm -rf x``.

A command line whose programs cannot be known without running it -- parameter expansion or
command substitution (``$``, backquotes), ``eval``/``source``, a shell reading a script -- is
*opaque*: a rule that looks at the command matches it, since it could be anything.
Interpreters running code (``python3 -c``) are what they are: a rule must name them.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;", "(", ")", "\n"})
_KEYWORDS = frozenset({"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while",
                       "until", "case", "esac", "in", "function", "select"})  # fmt: skip
_OPAQUE_PROGRAMS = frozenset({"eval", "source", ".", "alias"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Wrapper:
    """A program that runs the command after its options: ``valued`` options take a value
    (``-n 5``); ``params``: how many operands may come before the command (each possible start
    gives a form); ``assignments``: ``NAME=value`` operands may precede it (env)."""

    valued: frozenset[str] = frozenset()
    params: int = 0
    assignments: bool = False


def _w(valued: str = "", params: int = 0, assignments: bool = False) -> Wrapper:
    return Wrapper(frozenset(valued.split()), params, assignments)


WRAPPERS: dict[str, Wrapper] = {
    "env": _w("-u -C -S --unset --chdir --split-string", assignments=True),
    "nice": _w("-n --adjustment"),
    "timeout": _w("-k -s --kill-after --signal", params=1),
    "nohup": _w(),
    "stdbuf": _w("-i -o -e --input --output --error"),
    "xargs": _w(
        "-a -d -E -I -L -n -P -s --arg-file --delimiter --max-args --max-procs "
        "--max-chars --process-slot-var"
    ),
    "time": _w("-f -o --format --output"),
    "command": _w(),
    "builtin": _w(),
    "exec": _w("-a"),
    "sudo": _w("-u -g -C -D -h -p -U -r -t -T --user --group --chdir --host --prompt"),
    "doas": _w("-u -C"),
    "setsid": _w(),
    "ionice": _w("-c -n -p -t --class --classdata"),
    "chrt": _w(params=1),
    "taskset": _w(params=1),
    "flock": _w("-w -E --timeout --conflict-exit-code", params=1),
    "busybox": _w(),
    "unbuffer": _w(),
}


@dataclass(frozen=True)
class CommandView:
    """``forms``: each program the command runs, as ``name arg...`` (the raw line included);
    ``opaque``: what it runs cannot be read from the text (see the module docstring)."""

    forms: tuple[str, ...]
    opaque: bool


def read_command(command: str) -> CommandView:
    forms: list[str] = [command]
    opaque = _read(command, forms, 0)
    return CommandView(tuple(dict.fromkeys(forms)), opaque)


def _tokens(command: str) -> list[str] | None:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace_split = True
    lexer.whitespace = " \t\r"
    lexer.commenters = ""  # a '#' word stays: more words can only match more rules
    try:
        return list(lexer)
    except ValueError:
        return None


def _read(command: str, forms: list[str], depth: int) -> bool:
    """Add the forms of ``command`` to ``forms``; whether it is opaque."""
    opaque = depth > _MAX_DEPTH or "$" in command or "`" in command
    tokens = _tokens(command)
    if tokens is None:
        return True
    simple: list[str] = []
    for token in [*tokens, ";"]:
        if token in _SEPARATORS or _is_separator(token):
            if simple:
                opaque |= _simple(simple, forms, depth)
            simple = []
        else:
            simple.append(token)
    return opaque


def _is_separator(token: str) -> bool:
    """Newlines, and operators opening or closing a group or substitution (``<(``, ``)``)."""
    if set(token) <= set("\n"):
        return True
    return set(token) <= set(";&|()<>\n") and ("(" in token or ")" in token)


def _simple(words: list[str], forms: list[str], depth: int) -> bool:
    """One simple command (and what it wraps)."""
    while words and (words[0] in _KEYWORDS or _ASSIGNMENT.fullmatch(words[0])):
        words = words[1:]
    if not words:
        return False
    program = posixpath.basename(words[0]) or words[0]
    args = words[1:]
    forms.append(" ".join([program, *args]))
    if program in _OPAQUE_PROGRAMS or depth > _MAX_DEPTH:
        return True
    if program in SHELLS:
        return _shell(args, forms, depth)
    if program == "find":
        return _find_exec(args, forms, depth)
    wrapper = WRAPPERS.get(program)
    if wrapper is None:
        return False
    opaque = False
    for start in _wrapped_starts(args, wrapper, program):
        opaque |= _simple(args[start:], forms, depth + 1)
    if program == "env":
        for line in _split_strings(args):  # env -S 'cmd args': a command line of its own
            opaque |= _read(line, forms, depth + 1)
    return opaque


def _split_strings(args: list[str]) -> list[str]:
    found = []
    for i, arg in enumerate(args):
        if arg in ("-S", "--split-string"):
            found += args[i + 1 : i + 2]
        elif arg.startswith("--split-string="):
            found.append(arg.partition("=")[2])
        elif arg.startswith("-S"):
            found.append(arg[2:])
    return found


def _wrapped_starts(args: list[str], wrapper: Wrapper, program: str) -> list[int]:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        name = arg.split("=", 1)[0]
        i += 2 if name in wrapper.valued and "=" not in arg and len(name) == len(arg) else 1
    if wrapper.assignments:
        while i < len(args) and _ASSIGNMENT.fullmatch(args[i]):
            i += 1
    if program == "busybox" and i < len(args):
        return [i]
    return [i + n for n in range(wrapper.params + 1) if i + n < len(args)]


def _shell(args: list[str], forms: list[str], depth: int) -> bool:
    """``sh -c 'string'`` runs the string; a shell reading a script or stdin is opaque."""
    for i, arg in enumerate(args):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            if i + 1 < len(args):
                return _read(args[i + 1], forms, depth + 1)
            return True
        if not arg.startswith("-"):
            break
    return True


def _find_exec(args: list[str], forms: list[str], depth: int) -> bool:
    opaque = False
    for i, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            rest = args[i + 1 :]
            end = next((j for j, a in enumerate(rest) if a in (";", "+")), len(rest))
            opaque |= _simple(rest[:end], forms, depth + 1)
    return opaque
