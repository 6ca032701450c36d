"""Reading and changing the file for ``switchboard config``: a value by its key, the file with
its secrets redacted, and ``set`` keeping the file's comments and layout (tomlkit)."""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import Table

from switchboard.settings_reference import Setting

from .errors import ConfigError, Problem, nearest
from .keys import TOP, catalog
from .load import Loaded, _is_reference, check, parse

REDACTED = "**********"


def setting_of(path: Path, dotted: str) -> tuple[str, str, Setting, tuple[str, ...]]:
    """``gateway.http_port`` (or ``log_level`` at the top level) -> section, key, setting, and
    the path inside a table-valued setting (``router.channel_security.telegram.groups`` ->
    ``("telegram", "groups")``; empty for a whole setting)."""
    found = catalog()
    parts = dotted.split(".")
    for cut in (1, 0) if len(parts) > 1 else (0,):  # [section.]key[.inner...]
        section, key = parts[0] if cut else TOP, parts[cut]
        setting = found.sections.get(section, {}).get(key)
        inner = tuple(parts[cut + 1 :])
        if setting is not None and (not inner or "object" in setting.type.kind):
            if any(not part for part in inner):
                break
            return section, key, setting, inner
    every = [found.dotted(s, k) for s, keys in found.sections.items() for k in keys]
    hint = nearest(dotted, every)
    raise ConfigError([Problem(path, None, dotted, f"unknown setting{hint}")])


def parse_value(text: str) -> Any:
    """A TOML value (``8080``, ``true``, ``["a"]``, ``{a = 1}``, ``"x"``); else the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _document(path: Path) -> tomlkit.TOMLDocument:
    if not path.exists():
        return tomlkit.document()
    text = path.read_text(encoding="utf-8")
    parse(path, text)  # a syntax error with its line, as tomllib words it
    return tomlkit.parse(text)


def redacted(path: Path) -> str:
    """The file's text with every secret value written in it replaced (references are kept:
    they name where the secret is, not what it is)."""
    document = _document(path)
    found = catalog()
    for section, keys in found.sections.items():
        table: Any = document if section == TOP else document.get(section)
        if not isinstance(table, Table | tomlkit.TOMLDocument):
            continue
        for key, setting in keys.items():
            value = table.get(key)
            if setting.secret and key in table and value and not _is_reference(value):
                table[key] = REDACTED
    return tomlkit.dumps(document)


def get(path: Path, dotted: str) -> tuple[Any, Setting] | None:
    """The value written for ``dotted`` (secrets redacted), None when the file does not set it."""
    section, key, setting, inner = setting_of(path, dotted)
    document = parse(path, path.read_text(encoding="utf-8")) if path.exists() else {}
    value: Any = document if section == TOP else document.get(section, {})
    for name in (key, *inner):
        if not isinstance(value, dict) or name not in value:
            return None
        value = value[name]
    if setting.secret and value and not _is_reference(value):
        value = REDACTED
    return value, setting


def _table(path: Path, parent: Any, name: str, where: str) -> Any:
    """``parent[name]``, a table made when absent; ConfigError when it is something else."""
    if name not in parent:
        parent[name] = tomlkit.table()
    found = parent[name]
    if not isinstance(found, dict):
        problem = "is not a table: set the whole value instead"
        raise ConfigError([Problem(path, None, where, problem)])
    return found


def set_value(path: Path, dotted: str, text: str, environ: Mapping[str, str]) -> Loaded:
    """Write ``dotted = text`` into the file when the whole new file is valid; atomically (a
    temporary file renamed over it), keeping comments. ``dotted`` may reach inside a table
    setting (``router.channel_security.telegram.groups``: the tables on the way are made). A
    file holding a secret value is made 0600; otherwise the mode stays (0600 for a new file).
    ConfigError: nothing was written."""
    section, key, setting, inner = setting_of(path, dotted)
    document = _document(path)
    value = parse_value(text)
    table: Any = document if section == TOP else _table(path, document, section, section)
    names = (key, *inner)
    for depth, name in enumerate(names[:-1], start=1):
        table = _table(path, table, name, ".".join((section, *names[:depth])).lstrip("."))
    table[names[-1]] = value
    new_text = tomlkit.dumps(document)
    mode = (os.stat(path).st_mode & 0o777) if path.exists() else 0o600
    if setting.secret and value and not _is_reference(value):
        mode = 0o600
    loaded = check(path, new_text, environ, mode)
    write_atomic(path, new_text, mode)
    return loaded


def write_atomic(path: Path, text: str, mode: int) -> None:
    """``text`` into ``path`` through a temporary file of ``mode`` renamed over it: never a
    half-written file, never a moment with looser permissions (also the wizard's writer)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
