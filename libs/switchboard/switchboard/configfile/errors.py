"""What is wrong with a configuration file, said so that it can be fixed: the file, the line,
the setting and what it accepts."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    file: Path
    line: int | None  # 1-based; None when no line can be named (a whole-file problem)
    setting: str  # "gateway.http_port", "" for the whole file
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else str(self.file)
        setting = f" {self.setting}:" if self.setting else ""
        return f"{where}:{setting} {self.message}"


class ConfigError(Exception):
    """The file is refused as a whole: every problem found, not only the first."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def nearest(name: str, known: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest known name, else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _key_pattern(key: str) -> re.Pattern[str]:
    quoted = re.escape(key)
    return re.compile(rf"^\s*(?:{quoted}|\"{quoted}\"|'{quoted}')\s*=")


def line_of(text: str, section: str, key: str, inner: Sequence[str] = ()) -> int | None:
    """The line that sets ``key`` in table ``section`` ("" : the top level), also written as a
    dotted key (``gateway.http_port = ...``) at the top level; with ``inner`` (a path inside a
    table value: ``("telegram", "accounts", "family", "grops")``) the deepest of its lines found
    (the key inside its own table), else the setting's; None when not found."""
    for depth in range(len(inner), 0, -1):
        table = ".".join(part for part in (section, key, *inner[: depth - 1]) if part)
        found = _line_in(text, table, inner[depth - 1])
        if found is not None:
            return found
    return _line_in(text, section, key)


def _line_in(text: str, section: str, key: str) -> int | None:
    current = ""
    plain, dotted = _key_pattern(key), _key_pattern(f"{section}.{key}") if section else None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            current = header[1].replace('"', "").replace(" ", "")
            if section and f"{current}.".startswith(f"{section}.{key}."):
                return number  # a table value ([router.channel_security.telegram])
            continue
        if current == section and plain.match(line):
            return number
        if current == "" and dotted is not None and dotted.match(line):
            return number
    return None
