"""``$SB_HOME/switchboard.toml``: every setting in one file, for a person running Switchboard on
their own machine (docs/config-file.md). The file becomes the same ``SB_*`` variables the
settings classes read, under the real environment (a variable that is set wins), so Compose and
Kubernetes keep working unchanged.

:func:`apply` is called once, by the ``switchboard`` command before it runs a command
(:mod:`switchboard.cli.main`); nothing else reads the file. This module imports nothing heavy:
without a file, a command pays for one ``stat``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from switchboard.settings import Settings, default_home

from .errors import ConfigError, Problem

__all__ = [
    "FILE_NAME",
    "Applied",
    "ConfigError",
    "Problem",
    "apply",
    "hand_down",
    "home_of",
    "path_for",
]

FILE_NAME = "switchboard.toml"


class _Where(Settings):
    home: Path = Field(default_factory=default_home)  # SB_HOME
    config_file: Path | None = None  # SB_CONFIG_FILE: a ConfigMap's mount, say


def path_for(home: Path) -> Path:
    return home / FILE_NAME


def home_of(home_arg: str | None, environ: Mapping[str, str]) -> Path:
    """The data directory: ``--home``, else SB_HOME, else ~/.switchboard (as cli.home)."""
    return Path(home_arg or _Where.from_environ(environ).home).expanduser().resolve()


@dataclass(frozen=True)
class Applied:
    path: Path
    set: tuple[str, ...]  # variables the file gave
    overridden: tuple[str, ...]  # variables the file sets but the environment already had


def apply(environ: MutableMapping[str, str], home: Path) -> Applied | None:
    """Add the file's settings to ``environ`` where it sets none of their names; None when
    there is no file. Raises :class:`~.errors.ConfigError` for a file that is refused. The file
    is ``SB_CONFIG_FILE`` when that is set, else the one in ``home``."""
    path = _Where.from_environ(environ).config_file or path_for(home)
    if not path.is_file():
        return None
    from .load import load

    loaded = load(path, environ)
    given, overridden = [], []
    for env, value in loaded.environ.items():
        names = (env, *loaded.settings[env].aliases)
        if any(n in environ for n in names):
            overridden.append(env)
        else:
            environ[env] = value
            given.append(env)
    return Applied(path, tuple(given), tuple(overridden))


def hand_down(environ: MutableMapping[str, str], applied: Applied) -> None:
    """Tell the processes that read ``environ`` (this one, the services it starts) which file
    to watch and which of their variables came from it (:mod:`.reload`)."""
    environ["SB_CONFIG_FILE"] = str(applied.path)
    environ["SB_CONFIG_FROM_FILE"] = json.dumps(list(applied.set))
