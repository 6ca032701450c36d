"""The services of this process that can take new settings while running (docs/config-file.md):
each registers a ``reload(new_settings)`` hook through its runtime
(:meth:`switchboard.runtime.ServiceRuntime.on_reload`); :func:`apply` hands them settings built
from their environment with the changed variables, scoped to the service as at start.

The environment a hosted service was started with is known to its host
(:func:`switchboard.host.run_service` sets :data:`ENVIRON`); it is updated in place, so a
service that restarts later starts with the new values too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .settings import Settings, describe, environment_names

log = logging.getLogger(__name__)
Hook = Callable[[Any], Awaitable[None]]

# The environment of the service being started in this task (set by its host).
ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("sb_service_environ", default=None)


@dataclass
class Entry:
    name: str
    settings_class: type[Settings]
    environ: Mapping[str, str]
    hook: Hook

    def reads(self, env: str) -> bool:
        patterns = getattr(self.settings_class, "environment_patterns", ())
        return env in environment_names(self.settings_class) or any(
            re.fullmatch(p, env) for p in patterns
        )


_ENTRIES: list[Entry] = []


def register(name: str, settings_class: type[Settings], hook: Hook) -> Callable[[], None] | None:
    """Register ``hook`` of the service being started; the function that unregisters it, or
    None when no host said where its settings come from (a test's runtime: nothing reloads)."""
    environ = ENVIRON.get()
    if environ is None:
        return None
    entry = Entry(name, settings_class, environ, hook)
    _ENTRIES.append(entry)
    return lambda: _ENTRIES.remove(entry)


def registered() -> list[str]:
    return [e.name for e in _ENTRIES]


async def apply(changes: Mapping[str, str | None]) -> None:
    """Hand each registered service that reads one of ``changes`` (variable -> new value,
    None: unset) its settings built with them. Settings its class refuses are logged and the
    service keeps its running ones."""
    for entry in list(_ENTRIES):
        mine = {k: v for k, v in changes.items() if entry.reads(k)}
        if not mine:
            continue
        environ = dict(entry.environ)
        for env, value in mine.items():
            if value is None:
                environ.pop(env, None)
            else:
                environ[env] = value
        try:
            settings = entry.settings_class.from_environ(environ)
        except ValidationError as exc:
            log.error(
                "%s keeps its settings: the new ones are refused: %s", entry.name, describe(exc)
            )
            continue
        try:
            await entry.hook(settings)
        except Exception:  # one service's failure leaves the others to reload
            log.exception("%s failed to apply its new settings", entry.name)
            continue
        if isinstance(entry.environ, MutableMapping):  # a restart starts with the new values
            for env, value in mine.items():
                if value is None:
                    entry.environ.pop(env, None)
                else:
                    entry.environ[env] = value
        log.info("%s applied %s", entry.name, ", ".join(sorted(mine)))
