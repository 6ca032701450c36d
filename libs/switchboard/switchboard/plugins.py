"""Plugins: Python packages that extend a service, found through the entry points of the group
``switchboard.plugins`` and enabled by name.

A plugin package declares one entry point per plugin in its ``pyproject.toml``::

    [project.entry-points."switchboard.plugins"]
    weather = "sb_weather:plugin"

The entry point is a :class:`Plugin` (or a function without arguments returning one): its
``manifest`` (:class:`Manifest`: name, version, what it provides, the JSON Schema of its
configuration) and ``setup(api)``, which registers what the plugin provides with the host's
API: the agent's (``switchboard_agent.plugins.host.AgentPluginApi``: tools, hooks, model
providers) or the gateway's (``switchboard_gateway.plugin_host.GatewayPluginApi``: channels).
Each service sets up the enabled plugins that provide one of its kinds.

Nothing runs unless enabled: ``SB_PLUGINS`` is the allow list of plugin names (none by
default; installing a package enables nothing). ``SB_PLUGINS_CONFIG`` is a JSON object of each
plugin's configuration, validated against its manifest's schema before ``setup``.

A plugin that is not installed, raises while importing, is not a plugin, has a manifest whose
name is not its entry point's, or whose configuration does not validate, is skipped and
reported (:class:`PluginReport`, logged and shown in the service's ``/readyz`` details): the
service starts without it. Plugins are code the operator chose to run in the service's
process; they are trusted like the service itself (isolation here means one plugin's failure
does not take the service down, not a sandbox)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import Field

from switchboard.errors import PluginError
from switchboard.settings import Settings

log = logging.getLogger(__name__)

GROUP = "switchboard.plugins"
KINDS = ("tools", "hooks", "channels", "providers")
Kind = Literal["tools", "hooks", "channels", "providers"]
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


class PluginSettings(Settings):
    """``SB_PLUGINS`` (JSON list of names to enable, in order) and ``SB_PLUGINS_CONFIG`` (JSON
    object: plugin name -> its configuration)."""

    # JSON list of the plugins to enable, by entry point name of switchboard.plugins, in order
    # (installing a package enables nothing).
    plugins: list[str] = Field(default_factory=list)
    # JSON object: each plugin's configuration ({"<name>": {...}}), checked against its manifest's
    # schema before setup.
    plugins_config: dict[str, dict[str, Any]] = Field(default_factory=dict)


@dataclass(frozen=True)
class Manifest:
    name: str
    version: str
    provides: frozenset[str]  # of KINDS
    description: str = ""
    # JSON Schema (draft 2020-12) of the plugin's SB_PLUGINS_CONFIG entry ({} when absent).
    config_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})


@runtime_checkable
class Plugin(Protocol):
    @property
    def manifest(self) -> Manifest: ...

    def setup(self, api: Any) -> Any: ...  # may be async


@dataclass(frozen=True)
class LoadedPlugin:
    plugin: Plugin
    manifest: Manifest
    config: dict[str, Any]


@dataclass(frozen=True)
class PluginReport:
    name: str
    state: Literal["loaded", "failed", "not_installed"]
    detail: str = ""
    version: str = ""
    provides: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state}
        if self.version:
            out["version"] = self.version
        if self.provides:
            out["provides"] = list(self.provides)
        if self.detail:
            out["detail"] = self.detail
        return out


EntryPoints = Callable[[], Iterable[EntryPoint]]


def installed() -> Iterable[EntryPoint]:
    return entry_points(group=GROUP)


def discover(
    settings: PluginSettings,
    found: EntryPoints = installed,
    kinds: Collection[str] | None = None,
) -> tuple[list[LoadedPlugin], list[PluginReport]]:
    """The enabled plugins that import and validate, in ``SB_PLUGINS`` order, and a report on
    each enabled one (those that failed: why). ``kinds``: the kinds the calling service hosts;
    a plugin providing none of them is another service's, neither returned nor reported (a
    failure to load is reported everywhere: nobody can tell whose it was)."""
    points: dict[str, EntryPoint] = {}
    for ep in found():
        points.setdefault(ep.name, ep)
    for name in settings.plugins_config.keys() - set(settings.plugins):
        log.warning("SB_PLUGINS_CONFIG names %s, which SB_PLUGINS does not enable", name)
    loaded: list[LoadedPlugin] = []
    reports: list[PluginReport] = []
    for name in dict.fromkeys(settings.plugins):
        point = points.get(name)
        if point is None:
            detail = f"not installed (no entry point {name!r} in the group {GROUP})"
            reports.append(PluginReport(name, "not_installed", detail))
            log.warning("plugin %s skipped: %s", name, detail)
            continue
        try:
            plugin = load(point)
            config = checked_config(plugin.manifest, settings.plugins_config.get(name, {}))
        except PluginError as exc:
            reports.append(PluginReport(name, "failed", str(exc)))
            log.warning("plugin %s skipped: %s", name, exc)
            continue
        if kinds is not None and not plugin.manifest.provides & set(kinds):
            continue
        loaded.append(LoadedPlugin(plugin, plugin.manifest, config))
        reports.append(
            PluginReport(
                name,
                "loaded",
                version=plugin.manifest.version,
                provides=tuple(sorted(plugin.manifest.provides)),
            )
        )
    return loaded, reports


def failed(reports: list[PluginReport], name: str, detail: str) -> list[PluginReport]:
    """``reports`` with plugin ``name`` marked failed for ``detail`` (logged): a plugin that
    loaded but could not be set up, so the service goes on without it."""
    log.warning("plugin %s skipped: %s", name, detail)
    return [replace(r, state="failed", detail=detail) if r.name == name else r for r in reports]


def load(ep: EntryPoint) -> Plugin:
    """Import the entry point and check it is a plugin named as its entry point; raises
    :class:`PluginError` with a reason fit for a report (the traceback goes to the log)."""
    try:
        target = ep.load()
        plugin = target if hasattr(target, "manifest") or not callable(target) else target()
    except (Exception, SystemExit) as exc:  # a plugin's import must not stop the service
        log.error("plugin %s failed to import", ep.name, exc_info=exc)
        # A module missing here (another service's package, in a per-service image) is named.
        missing = f": {exc.name}" if isinstance(exc, ModuleNotFoundError) and exc.name else ""
        raise PluginError(f"failed to import ({type(exc).__name__}{missing})") from None
    manifest = getattr(plugin, "manifest", None)
    if not isinstance(manifest, Manifest) or not callable(getattr(plugin, "setup", None)):
        raise PluginError("not a Switchboard plugin (it needs a Manifest and a setup function)")
    if manifest.name != ep.name or not NAME.fullmatch(manifest.name):
        raise PluginError(f"its manifest is named {manifest.name!r}, its entry point {ep.name!r}")
    unknown = set(manifest.provides) - set(KINDS)
    if unknown:
        raise PluginError(
            f"its manifest provides {', '.join(sorted(unknown))}: not one of {', '.join(KINDS)}"
        )
    return plugin


def checked_config(manifest: Manifest, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` if it validates against the manifest's schema; raises :class:`PluginError`."""
    # Imported here, by an enabled plugin only: jsonschema is 4.5 % of a start's import work
    # (docs/startup.md, third round).
    from jsonschema import Draft202012Validator, SchemaError

    try:
        validator = Draft202012Validator(dict(manifest.config_schema))
        Draft202012Validator.check_schema(dict(manifest.config_schema))
    except SchemaError:
        raise PluginError("its manifest's config_schema is not a JSON Schema") from None
    errors = sorted(validator.iter_errors(config), key=str)
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path)
        at = f" at {where}" if where else ""
        # The rule, never the value: a configuration may hold secrets.
        raise PluginError(
            f"SB_PLUGINS_CONFIG is invalid{at}: it fails the schema's {first.validator!r} rule"
        )
    return config


SETUP_TIMEOUT_S = 30.0


async def run_setup(plugin: Plugin, api: Any, name: str) -> None:
    """``plugin.setup(api)``, awaited if it is async, within :data:`SETUP_TIMEOUT_S`; any
    failure is a :class:`PluginError` with a reason fit for a report (the traceback goes to
    the log): a plugin's failure must not stop the service."""
    try:
        async with asyncio.timeout(SETUP_TIMEOUT_S):
            result = plugin.setup(api)
            if inspect.isawaitable(result):
                await result
    except PluginError:
        raise
    except TimeoutError:
        raise PluginError(f"setup did not finish within {SETUP_TIMEOUT_S:g}s") from None
    except Exception as exc:
        log.error("plugin %s failed in setup", name, exc_info=exc)
        raise PluginError(f"setup failed ({type(exc).__name__})") from None
