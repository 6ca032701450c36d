"""What a tool call does, in terms shared by the tools that can do it. Pure, no I/O.

Several tools can do the same thing: ``exec`` and ``process`` (action ``start``) run a command;
``write``, ``edit`` and ``apply_patch`` write files. An approval rule about one of them is about
what it does, so it covers the others too (:data:`CAPABILITIES`): ``write:path=*.sh`` also
gates an ``edit`` of ``run.sh`` and an ``apply_patch`` creating it, ``exec:command=rm *`` also
gates ``process`` starting ``rm``. To match them, a call is read into *facets*: its arguments
as every tool of its capability names them, each with the values a rule's pattern is tried on.

- ``command`` (exec, process start): the raw line and every program it runs with its arguments
  (:mod:`.commandline`); an opaque line matches every pattern.
- ``cwd``: as given and normalised (``a/../b`` -> ``b``).
- ``path`` (write, edit, apply_patch): each file written, as given and normalised; for a patch,
  every file it names (``a/``/``b/`` prefixes removed too).
- ``content``: the text written (write's ``content``, edit's ``new_text``, a patch's added
  lines).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from .commandline import read_command

CAPABILITIES: dict[str, tuple[str, ...]] = {
    "run a command": ("exec", "process"),
    "write files": ("write", "edit", "apply_patch"),
}
# The arguments every tool of a capability has (under its own name, see ``facets``).
SHARED_ARGS: dict[str, frozenset[str]] = {
    **dict.fromkeys(CAPABILITIES["run a command"], frozenset({"command", "cwd"})),
    **dict.fromkeys(CAPABILITIES["write files"], frozenset({"path", "content"})),
}
SIBLINGS: dict[str, tuple[str, ...]] = {
    tool: tuple(t for t in tools if t != tool) for tools in CAPABILITIES.values() for tool in tools
}


@dataclass(frozen=True)
class Facet:
    """The values one argument of a call stands for; ``any_value``: it could be anything
    (an opaque command line), so every pattern matches it."""

    values: tuple[str, ...]
    any_value: bool = False


Facets = dict[str, Facet]


def _paths(*raw: str) -> tuple[str, ...]:
    found: list[str] = []
    for path in raw:
        found.append(path)
        if path:
            found.append(posixpath.normpath(path))
    return tuple(dict.fromkeys(found))


def _patch_paths(patch: str) -> tuple[tuple[str, ...], str]:
    """Every file a unified diff names, and its added text."""
    paths: list[str] = []
    added: list[str] = []
    for line in patch.splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t", 1)[0].strip()
            if name != "/dev/null":
                stripped = name[2:] if name.startswith(("a/", "b/")) else name
                paths += _paths(name, stripped)
        elif line.startswith("diff --git "):
            for name in line[len("diff --git ") :].split():
                paths += _paths(name, name[2:] if name.startswith(("a/", "b/")) else name)
        elif line.startswith("+"):
            added.append(line[1:])
    return tuple(dict.fromkeys(paths)), "\n".join(added)


def facets(tool: str, args: Mapping[str, object] | None) -> Facets | None:
    """The facets of a call of ``tool``, or ``None`` when it does nothing a capability covers
    (``process`` polling, a tool of no capability)."""
    given = args if isinstance(args, Mapping) else {}
    found: Facets = {}
    if tool == "exec" or (tool == "process" and given.get("action") == "start"):
        command = given.get("command")
        if isinstance(command, str):
            view = read_command(command)
            found["command"] = Facet(view.forms, view.opaque)
        cwd = given.get("cwd")
        if isinstance(cwd, str):
            found["cwd"] = Facet(_paths(cwd))
        return found
    if tool in ("write", "edit"):
        path = given.get("path")
        if isinstance(path, str):
            found["path"] = Facet(_paths(path))
        content = given.get("content" if tool == "write" else "new_text")
        if isinstance(content, str):
            found["content"] = Facet((content,))
        return found
    if tool == "apply_patch":
        patch = given.get("patch")
        if isinstance(patch, str):
            paths, added = _patch_paths(patch)
            found["path"] = Facet(paths)
            found["content"] = Facet((added,))
        return found
    return None
