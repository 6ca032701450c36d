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


def setting_of(path: Path, dotted: str) -> tuple[str, str, Setting]:
    """``gateway.http_port`` (or ``log_level`` at the top level) -> section, key, setting."""
    found = catalog()
    section, _, key = dotted.rpartition(".")
    setting = found.sections.get(section, {}).get(key)
    if setting is None:
        every = [found.dotted(s, k) for s, keys in found.sections.items() for k in keys]
        hint = nearest(dotted, every)
        raise ConfigError([Problem(path, None, dotted, f"unknown setting{hint}")])
    return section, key, setting


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
    section, key, setting = setting_of(path, dotted)
    document = parse(path, path.read_text(encoding="utf-8")) if path.exists() else {}
    table = document if section == TOP else document.get(section, {})
    if key not in table:
        return None
    value = table[key]
    if setting.secret and value and not _is_reference(value):
        value = REDACTED
    return value, setting


def set_value(path: Path, dotted: str, text: str, environ: Mapping[str, str]) -> Loaded:
    """Write ``dotted = text`` into the file when the whole new file is valid; atomically (a
    temporary file renamed over it), keeping comments. A file holding a secret value is made
    0600; otherwise the mode stays (0600 for a new file). ConfigError: nothing was written."""
    section, key, setting = setting_of(path, dotted)
    document = _document(path)
    value = parse_value(text)
    if section == TOP:
        document[key] = value
    else:
        if section not in document:
            document[section] = tomlkit.table()
        table = document[section]
        if not isinstance(table, Table):
            raise ConfigError([Problem(path, None, section, "is not a table ([section])")])
        table[key] = value
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
