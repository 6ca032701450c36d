"""A setting's type and default as data (kind, unit, bounds, choices) and as the short text the
reference shows (``int 0..65535``, ``one of: local, openai``, ``seconds > 0``, ``JSON list``).

The data is what a JSON Schema of the settings (issue 27) needs; the text is one rendering.
Defaults that depend on the machine (the home directory, the working directory) are shown
symbolically, and a secret's default is never shown.
"""

from __future__ import annotations

import enum
import json
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel, BeforeValidator, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

# Names whose number is a quantity of something: the unit says it (suffix -> unit).
_UNITS = {"_s": "seconds", "_ms": "milliseconds", "_bytes": "bytes", "_chars": "characters"}
_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
_SEQUENCES = (list, tuple, set, frozenset)


@dataclass(frozen=True)
class TypeInfo:
    """What a setting accepts. ``kind``: string, int, number, bool, path, size, list, object,
    choice, or ``a|b`` for alternatives; ``bounds``: ge/gt/le/lt (also min/max length)."""

    kind: str
    unit: str = ""
    bounds: Mapping[str, float] = field(default_factory=dict)
    choices: tuple[str, ...] = ()
    item: str = ""  # the kind of a list's items or an object's values
    pattern: str = ""
    secret: bool = False

    def text(self) -> str:
        """The readable form, e.g. ``int 0..65535``, ``seconds > 0``, ``one of: a, b``."""
        if self.choices:
            return "one of: " + ", ".join(self.choices)
        if self.kind in ("list", "object"):
            what = "JSON list" if self.kind == "list" else "JSON object"
            return f"{what} of {self.item}s" if self.item in ("string", "path") else what
        words = {"bool": "true/false", "object": "JSON object", "list": "JSON list"}
        name = self.unit or " or ".join(words.get(k, k) for k in self.kind.split("|"))
        if self.kind == "int" and self.unit in ("seconds",):
            name += " (whole)"
        elif self.kind == "size":
            name = "size (bytes, or 512M, 1G)"
        if self.pattern:
            name += f" matching {self.pattern}"
        return f"{name} {bound_text(self.bounds)}".strip()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def bound_text(bounds: Mapping[str, float]) -> str:
    low, high = bounds.get("ge"), bounds.get("le")
    if low is not None and high is not None and len(bounds) == 2:
        return f"{_number(low)}..{_number(high)}"
    order = ("ge", "gt", "le", "lt")
    return ", ".join(f"{_BOUNDS[k]} {_number(bounds[k])}" for k in order if k in bounds)


def _bounds(metadata: list[Any]) -> dict[str, float]:
    found: dict[str, float] = {}
    for item in metadata:
        for name in ("ge", "gt", "le", "lt"):
            value = getattr(item, name, None)
            if isinstance(value, int | float) and isinstance(item, annotated_types.BaseMetadata):
                found[name] = value
    return found


def _pattern(metadata: list[Any]) -> str:
    for item in metadata:
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            return pattern
    return ""


def _unit(name: str) -> str:
    return next((unit for suffix, unit in _UNITS.items() if name.endswith(suffix)), "")


def _strip(annotation: Any) -> tuple[Any, list[Any]]:
    """``Annotated[T, ...]`` -> ``T`` and its metadata."""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extra = typing.get_args(annotation)
        return base, list(extra)
    return annotation, []


def has_secret(annotation: Any, seen: frozenset[type] = frozenset()) -> bool:
    """Whether ``annotation`` is or holds a ``SecretStr`` (also inside models and containers)."""
    annotation, _ = _strip(annotation)
    if annotation is SecretStr:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return False
        inner = seen | {annotation}
        return any(has_secret(f.annotation, inner) for f in annotation.model_fields.values())
    return any(has_secret(a, seen) for a in typing.get_args(annotation) if a is not Ellipsis)


def _plain_kind(annotation: Any) -> str:
    """The kind of one non-optional type, for items and alternatives."""
    annotation = _strip(annotation)[0]
    origin = typing.get_origin(annotation) or annotation
    if annotation in (str, SecretStr) or annotation is Any:
        return "string"
    if annotation is bool:
        return "bool"
    if annotation is int:
        return "int"
    if annotation is float:
        return "number"
    if annotation is Path:
        return "path"
    if origin in _SEQUENCES:
        return "list"
    if origin in (dict, Mapping) or (
        isinstance(annotation, type) and issubclass(annotation, BaseModel)
    ):
        return "object"
    if origin is typing.Literal or (
        isinstance(annotation, type) and issubclass(annotation, enum.Enum)
    ):
        return "choice"
    raise TypeError(f"no readable kind for {annotation!r}: teach settings_reference.readable")


def _choices(annotation: Any) -> tuple[str, ...]:
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(str(a) for a in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return tuple(str(e.value) for e in annotation)
    return ()


def type_info(name: str, annotation: Any, metadata: list[Any]) -> TypeInfo:
    """What the field ``name`` of type ``annotation`` (with pydantic's ``metadata``) accepts."""
    annotation, extra = _strip(annotation)
    metadata = [*metadata, *extra]
    secret = has_secret(annotation)
    options = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        if len(options) > 1:
            kinds = sorted({_plain_kind(a) for a in options})
            return TypeInfo("|".join(kinds), secret=secret)
        annotation = options[0]
    base, more = _strip(annotation)
    metadata += more
    kind = _plain_kind(base)
    if kind == "int" and any(
        isinstance(m, BeforeValidator) and "size" in getattr(m.func, "__name__", "")
        for m in metadata
    ):
        kind = "size"
    item = ""
    if kind in ("list", "object"):
        args = [a for a in typing.get_args(base) if a is not Ellipsis]
        item = _plain_kind(args[-1]) if args and args[-1] is not Any else ""
    unit = _unit(name) if kind in ("int", "number") else ""
    return TypeInfo(
        kind,
        unit=unit,
        bounds=_bounds(metadata),
        choices=_choices(base),
        item=item,
        pattern=_pattern(metadata) if kind == "string" else "",
        secret=secret,
    )


def default_value(info: FieldInfo) -> Any:
    """The field's default (``default_factory`` called), or ``PydanticUndefined``."""
    if info.default_factory is not None:
        return info.default_factory()  # type: ignore[call-arg]
    return info.default


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset):
        return sorted(_jsonable(v) for v in value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in sorted(value.items())}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


def symbolic(text: str) -> str:
    """``text`` with this machine's home and working directories as ``~`` and ``.``."""
    for real, shown in ((str(Path.home()), "~"), (os.getcwd(), ".")):
        if len(real) > 1:
            text = text.replace(real, shown)
    return text


def default_text(name: str, value: Any, secret: bool) -> str:
    """The default as an operator would write it; a secret's never (``unset`` or ``hidden``)."""
    if value is PydanticUndefined:
        return "required"
    if secret:
        shown = value.get_secret_value() if isinstance(value, SecretStr) else value
        return "hidden (built in)" if shown else "unset"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str):
        return "empty" if value == "" else symbolic(value)
    if isinstance(value, Path):
        return symbolic(str(value))
    if isinstance(value, int | float):
        text = _number(value)
        if name.endswith("_bytes") and value >= 1024 and value % 1024 == 0:
            mib = value % 1048576 == 0
            text += f" ({int(value // (1048576 if mib else 1024))} {'MiB' if mib else 'KiB'})"
        return text
    return symbolic(json.dumps(_jsonable(value), separators=(", ", ": "), ensure_ascii=False))
