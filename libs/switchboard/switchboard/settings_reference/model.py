"""Every setting of Switchboard as data: one :class:`Setting` per environment variable, read
from the settings classes of every service of the registry and of the command line.

This is the one model of "every setting": ``docs/configuration.md`` is one rendering of it
(:mod:`.markdown`); a JSON Schema of a configuration file (issue 27) is meant to be another.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import AliasChoices, BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from switchboard import host, registry
from switchboard.cli import doctor, serve
from switchboard.cli.settings import LauncherSettings

from .comments import description_of
from .readable import TypeInfo, default_text, default_value, type_info


@dataclass(frozen=True)
class Source:
    """A program that reads settings: a service of the registry or a ``switchboard`` command."""

    name: str
    summary: str
    settings: type[BaseSettings]
    service: bool  # one of the registry's services (else part of the command line)


@dataclass(frozen=True)
class Setting:
    """One environment variable: where it is read, what it accepts, its default."""

    env: str  # the name an operator sets
    aliases: tuple[str, ...]  # other names read for it (SB_OPENAI_API_KEY...)
    field: str  # the settings classes' attribute
    services: tuple[str, ...]  # the Sources that read it, in sources() order
    type: TypeInfo
    type_text: str  # readable; "gateway: ...; launcher: ..." when the readers differ
    default: str  # readable and symbolic; never a secret's value
    description: str  # "" : none written yet (see missing())
    secret: bool
    required: bool


def sources() -> list[Source]:
    """Every settings class: the registry's services in its order, then the command line's
    (``switchboard up`` and the admin commands, ``serve``, ``doctor``)."""
    found = [Source(s.name, s.summary, host.settings_class(s), True) for s in registry.SERVICES]
    return [
        *found,
        Source("launcher", "`switchboard up` and the admin commands", LauncherSettings, False),
        Source(
            "serve",
            "`switchboard serve`, as the container images run it",
            serve.ServeSettings,
            False,
        ),
        Source("doctor", "`switchboard doctor`", doctor._SkillPlaces, False),
    ]


def env_names(settings: type[BaseSettings], name: str, info: FieldInfo) -> tuple[str, ...]:
    """The variables read for the field, the one an operator sets first."""
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(c.upper() for c in alias.choices if isinstance(c, str))
    if isinstance(alias, str):
        return (alias.upper(),)
    return (str(settings.model_config.get("env_prefix", "")).upper() + name.upper(),)


@dataclass(frozen=True)
class _Definition:
    source: str
    env: str
    aliases: tuple[str, ...]
    field: str
    type: TypeInfo
    default: str
    description: str
    required: bool


def _define(source: str, settings: type, name: str, info: FieldInfo, env: str) -> _Definition:
    kind = type_info(name, info.annotation, list(info.metadata))
    value = default_value(info)
    shown = default_text(name + ("_bytes" if kind.kind == "size" else ""), value, kind.secret)
    return _Definition(
        source=source,
        env=env,
        aliases=(),
        field=name,
        type=kind,
        default=shown,
        description=description_of(settings, name, info, env),
        required=info.is_required(),
    )


_PATTERN = re.compile(r"\^([A-Z0-9_]+?)\(.+?\)_\(([A-Z0-9_|]+)\)\$")


def _nested_field(settings: type[BaseSettings], name: str) -> tuple[type, FieldInfo] | None:
    """A field ``name`` of a model that one of ``settings``' fields holds (ChannelSecurity's
    ``dm_policy`` for SB_<CHANNEL>_DM_POLICY)."""
    for info in settings.model_fields.values():
        for arg in _types_in(info.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel) and name in arg.model_fields:
                return arg, arg.model_fields[name]
    return None


def _types_in(annotation: Any) -> Iterator[Any]:
    yield annotation
    for arg in getattr(annotation, "__args__", ()):
        yield from _types_in(arg)


def _pattern_definitions(source: Source) -> Iterator[_Definition]:
    """Variables whose names vary (``environment_patterns``: ``SB_<CHANNEL>_DM_POLICY``...),
    each described by the model field it fills."""
    for pattern in getattr(source.settings, "environment_patterns", ()):
        match = _PATTERN.fullmatch(pattern)
        if match is None:
            raise ValueError(f"{source.name}: cannot list the variables of {pattern!r}")
        for suffix in match[2].split("|"):
            found = _nested_field(source.settings, suffix.lower())
            if found is None:
                raise ValueError(f"{source.name}: no model field for {pattern!r}'s {suffix}")
            model, info = found
            env = f"{match[1]}<CHANNEL>_{suffix}"
            yield _define(source.name, model, suffix.lower(), info, env)


def _definitions(source: Source) -> Iterator[_Definition]:
    for name, info in source.settings.model_fields.items():
        env, *aliases = env_names(source.settings, name, info)
        plain = _define(source.name, source.settings, name, info, env)
        yield _Definition(**{**plain.__dict__, "aliases": tuple(aliases)})
    yield from _pattern_definitions(source)


def _merged(values: Iterable[tuple[str, str]]) -> str:
    """One text, or ``a, b: x; c: y`` when the readers differ."""
    by_value: dict[str, list[str]] = {}
    for source, value in values:
        by_value.setdefault(value, []).append(source)
    if len(by_value) == 1:
        return next(iter(by_value))
    return "; ".join(f"{', '.join(who)}: {value}" for value, who in by_value.items())


def collect(chosen: list[Source] | None = None) -> list[Setting]:
    """Every setting, one per variable (a variable several programs read is one Setting
    listing them), sorted by name."""
    order = chosen if chosen is not None else sources()
    grouped: dict[str, list[_Definition]] = {}
    for source in order:
        for definition in _definitions(source):
            grouped.setdefault(definition.env, []).append(definition)
    settings = []
    for env, found in sorted(grouped.items()):
        first = found[0]
        settings.append(
            Setting(
                env=env,
                aliases=tuple(sorted({a for d in found for a in d.aliases})),
                field=first.field,
                services=tuple(dict.fromkeys(d.source for d in found)),
                type=first.type,
                type_text=_merged((d.source, d.type.text()) for d in found),
                default=_merged((d.source, d.default) for d in found),
                description=next((d.description for d in found if d.description), ""),
                secret=any(d.type.secret for d in found),
                required=all(d.required for d in found),
            )
        )
    return settings


def missing(settings: Iterable[Setting]) -> list[str]:
    """The variables that have no description anywhere."""
    return [s.env for s in settings if not s.description]
