"""``switchboard.toml`` -> the ``SB_*`` mapping the settings classes read, checked three ways:
known keys (with the nearest known one), the JSON Schema (:mod:`.schema`) and the settings
classes themselves (their validators are the last word). A file is refused as a whole."""

from __future__ import annotations

import json
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError

from switchboard.settings import Settings
from switchboard.settings_reference import Setting

from .errors import ConfigError, Problem, line_of, nearest
from .keys import TOP, Catalog, catalog
from .schema import generate

REFERENCES = ("env:", "file:")
_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")


@dataclass
class Loaded:
    """The file as variables: ``environ`` (variable -> value) and where each was written."""

    path: Path
    environ: dict[str, str] = field(default_factory=dict)
    origin: dict[str, tuple[str, str]] = field(default_factory=dict)  # variable -> (section, key)
    settings: dict[str, Setting] = field(default_factory=dict)  # variable -> its setting


def parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _AT_LINE.search(str(exc))
        message = _AT_LINE.sub("", str(exc)).strip()
        line = int(found[1]) if found else None
        raise ConfigError([Problem(path, line, "", f"not valid TOML: {message}")]) from exc


def load(path: Path, environ: Mapping[str, str]) -> Loaded:
    """The file at ``path``, checked; ConfigError with every problem. ``environ`` resolves
    ``env:NAME`` references."""
    text = path.read_text(encoding="utf-8")
    return check(path, text, environ, stat.S_IMODE(path.stat().st_mode))


def check(path: Path, text: str, environ: Mapping[str, str], mode: int) -> Loaded:
    """``text`` as the file ``path`` with permissions ``mode`` would be read."""
    data = parse(path, text)
    found = catalog()
    problems: list[Problem] = []
    loaded = Loaded(path)
    literal: list[str] = []
    for section, key, value in _items(data, found):
        where = found.dotted(section, key)
        line = line_of(text, section, key)
        setting = found.sections.get(section, {}).get(key)
        if setting is None:
            problems.append(Problem(path, line, where, _unknown(found, section, key)))
            continue
        try:
            as_text = _text(value, setting, path, environ)
        except ValueError as exc:
            problems.append(Problem(path, line, where, str(exc)))
            continue
        if setting.secret and value and not _is_reference(value):
            literal.append(f"{where} (line {line})" if line else where)
        earlier = loaded.origin.get(setting.env)
        if earlier is not None and loaded.environ[setting.env] != as_text:
            other = found.dotted(*earlier)
            message = f"{setting.env} is also set, differently, by {other}: keep one"
            problems.append(Problem(path, line, where, message))
            continue
        loaded.environ[setting.env] = as_text
        loaded.origin[setting.env] = (section, key)
        loaded.settings[setting.env] = setting
    if literal and mode & 0o077:
        problems.append(
            Problem(
                path,
                None,
                "",
                f"holds secret values ({', '.join(literal)}) but its mode is {mode:04o}: run"
                f" `chmod 600 {path}`, or write them as env:NAME or file:PATH references",
            )
        )
    problems += _schema_problems(path, text, data, found)
    if not problems:
        problems += _class_problems(path, text, loaded, found)
    if problems:
        raise ConfigError(sorted(problems, key=lambda p: (p.line or 0, p.setting)))
    return loaded


def _items(data: Mapping[str, Any], found: Catalog) -> list[tuple[str, str, Any]]:
    items: list[tuple[str, str, Any]] = []
    for key, value in data.items():
        if key != TOP and key in found.sections and isinstance(value, dict):
            items += [(key, k, v) for k, v in value.items()]
        else:
            items.append((TOP, key, value))
    return items


def _unknown(found: Catalog, section: str, key: str) -> str:
    elsewhere = [s for s, keys in found.sections.items() if key in keys]
    if elsewhere:
        places = ", ".join(found.describe(s) for s in elsewhere)
        return f"not read by {found.describe(section)}: write it in {places}"
    known = list(found.sections[section])
    if section == TOP:
        known += [s for s in found.sections if s != TOP]
    return f"unknown setting{nearest(key, known)}"


def _is_reference(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(REFERENCES)


def _resolve(reference: str, path: Path, environ: Mapping[str, str]) -> str:
    kind, _, name = reference.partition(":")
    if kind == "env":
        if name not in environ:
            raise ValueError(f"refers to the environment variable {name}, which is not set")
        return environ[name]
    target = (path.parent / Path(name).expanduser()).resolve()
    try:
        return target.read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise ValueError(f"refers to {target}, which cannot be read: {exc.strerror}") from exc


def _nested(value: Any, path: Path, environ: Mapping[str, str]) -> Any:
    """A secret setting written as a table (named channel accounts, auth profiles) with its
    references resolved wherever they are, so each token inside may be one."""
    if _is_reference(value):
        return _resolve(value, path, environ)
    if isinstance(value, dict):
        return {k: _nested(v, path, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [_nested(v, path, environ) for v in value]
    return value


def _text(value: Any, setting: Setting, path: Path, environ: Mapping[str, str]) -> str:
    """The value as its environment variable would hold it."""
    if setting.secret and _is_reference(value):
        return _resolve(value, path, environ)
    if setting.secret and isinstance(value, list | dict):
        value = _nested(value, path, environ)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def _schema_problems(path: Path, text: str, data: Any, found: Catalog) -> list[Problem]:
    problems = []
    validator = jsonschema.Draft202012Validator(generate())
    for error in validator.iter_errors(data):
        if error.validator == "additionalProperties":
            continue  # unknown keys: reported above, with the nearest known one
        steps = [str(p) for p in error.absolute_path]
        section = steps[0] if len(steps) > 1 and steps[0] in found.sections else TOP
        key = steps[1] if section != TOP else (steps[0] if steps else "")
        setting = found.sections.get(section, {}).get(key)
        accepted = f" (accepted: {setting.type_text})" if setting else ""
        where = found.dotted(section, key) if key else ""
        # jsonschema's message quotes the value: never a secret's.
        message = "not accepted" if setting and setting.secret else error.message
        problems.append(Problem(path, line_of(text, section, key), where, message + accepted))
    return problems


def _class_problems(path: Path, text: str, loaded: Loaded, found: Catalog) -> list[Problem]:
    """What the settings classes refuse of the file's values (each class reads what it reads)."""
    problems: dict[tuple[str, str], Problem] = {}
    for source in found.sources:
        if not issubclass(source.settings, Settings):
            raise TypeError(f"{source.name}: {source.settings.__name__} is not a Settings class")
        try:
            source.settings.from_environ(loaded.environ)
        except ValidationError as exc:
            for error in exc.errors():
                name = str(error["loc"][0]) if error["loc"] else ""
                env = _variable(loaded, name, str(error["msg"]))
                section, key = loaded.origin.get(env, (TOP, ""))
                setting = loaded.settings.get(env)
                accepted = f" (accepted: {setting.type_text})" if setting else ""
                inner = "".join(
                    f"[{s}]" if isinstance(s, int) else f".{s}" for s in error["loc"][1:]
                )
                problem = str(error["msg"]).removeprefix("Value error, ")
                message = (f"at {inner.lstrip('.')}: " if inner else "") + problem + accepted
                where = found.dotted(section, key) if key else name
                path_in = [str(s) for s in error["loc"][1:] if isinstance(s, str)]
                line = line_of(text, section, key, path_in) if key else None
                problems.setdefault((section, key), Problem(path, line, where, message))
    return list(problems.values())


def _variable(loaded: Loaded, name: str, message: str) -> str:
    """The variable of a settings field (or alias) named in a validation error; for an error
    of the whole class (a model validator), the first of the file's variables its message
    names (SB_GATEWAY_TOKEN is too weak...)."""
    for env, setting in loaded.settings.items():
        names = {setting.field, env.lower(), *(a.lower() for a in setting.aliases)}
        if name.lower() in names:
            return env
    if not name:
        return next((env for env in loaded.settings if re.search(rf"\b{env}\b", message)), "")
    return ""
