"""Generated blocks inside hand-written files: the lines between ``# BEGIN generated: <name>``
and ``# END generated`` belong to the generator, everything around them to people.

A *span* is a run of blocks with only separators between them (blank lines, ``---``): the
services of docker-compose.yml, the NetworkPolicies. The generator rewrites a span whole, so
a service added to or removed from the registry gains or loses its block, and a hand edit
inside a block shows as a difference. Blocks of the span ``services`` are all those whose
name is not another span's (so the block of a service no longer in the registry is found, and
dropped)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

BEGIN = re.compile(r"^[ \t]*# BEGIN generated: (?P<name>\S.*?)\s*$")
END = re.compile(r"^[ \t]*# END generated\s*$")
SEPARATORS = {"", "---"}


class MarkerError(ValueError):
    """The markers of a file are not as the generator needs them (a person must look)."""


@dataclass(frozen=True)
class Span:
    blocks: tuple[tuple[str, list[str]], ...]  # (name, lines without newlines)
    indent: str = ""  # of the marker lines
    separator: tuple[str, ...] = ("",)  # lines between two blocks
    services: bool = False  # the span of every unreserved name

    def render(self) -> list[str]:
        lines: list[str] = []
        for i, (name, body) in enumerate(self.blocks):
            if i:
                lines += self.separator
            lines += [
                f"{self.indent}# BEGIN generated: {name}",
                *body,
                f"{self.indent}# END generated",
            ]
        return lines


def blocks(lines: list[str], where: str) -> list[tuple[int, int, str]]:
    """(line of BEGIN, line of END, name) of every block, in order."""
    found = []
    start: tuple[int, str] | None = None
    for number, line in enumerate(lines):
        begin = BEGIN.match(line)
        if begin:
            if start:
                raise MarkerError(f"{where}:{number + 1}: BEGIN inside the block {start[1]!r}")
            start = (number, begin["name"])
        elif END.match(line):
            if not start:
                raise MarkerError(f"{where}:{number + 1}: END generated without a BEGIN")
            found.append((start[0], number, start[1]))
            start = None
    if start:
        raise MarkerError(f"{where}:{start[0] + 1}: block {start[1]!r} has no END generated")
    return found


def fill(text: str, spans: list[Span], where: str) -> str:
    """``text`` with each span's blocks rewritten (the rest of the file left as it is)."""
    lines = text.split("\n")
    found = blocks(lines, where)
    reserved = {name for span in spans if not span.services for name, _ in span.blocks}
    replacements = []
    for span in spans:
        names = {name for name, _ in span.blocks}
        members = [b for b in found if (b[2] not in reserved if span.services else b[2] in names)]
        if not members:
            wanted = span.blocks[0][0] if span.blocks else "?"
            raise MarkerError(f"{where}: no `# BEGIN generated: {wanted}` block to fill")
        for (_, end, name), (begin, _, _) in pairwise(members):
            between = [line.strip() for line in lines[end + 1 : begin]]
            if any(line not in SEPARATORS for line in between):
                raise MarkerError(
                    f"{where}:{end + 2}: hand-written lines between the generated blocks {name!r}"
                    " and the next; move them out of the run of blocks"
                )
        replacements.append((members[0][0], members[-1][1], span.render()))
    for begin, end, new in sorted(replacements, reverse=True):
        lines[begin : end + 1] = new
    return "\n".join(lines)
