"""The agent's side of plugins (:mod:`switchboard.plugins`): what a plugin's ``setup(api)``
gets (:class:`AgentPluginApi`) and what the agent takes from it.

Wired: **tools** (agent-local tools, :class:`~..tools.local.LocalTool`: offered to the model
next to the others, judged by the tool policy, hooks and approval rules like any call, run in
the agent with a deadline of ``SB_TOOL_TIMEOUT_S``), **hooks** (:mod:`.hooks`) and model
**providers** (``register_provider(name, factory)``: ``name:<model>`` is a model reference
like ``openai:<model>``, its calls go through the failover; see :mod:`..providers.plugin`).
**Channels** are the gateway's (``switchboard_gateway.plugin_host``): a plugin that provides
only channels is not set up here (nor in this ``/readyz``); ``register_channel`` is accepted and
ignored, so one plugin may provide both.

A plugin is all or nothing: its registrations take effect only if its ``setup`` returns
(within :data:`switchboard.plugins.SETUP_TIMEOUT_S`) and they are all acceptable (a tool name
another tool has, a hook for an unknown event, a kind its manifest does not provide).
Otherwise the plugin is skipped, logged and reported as failed, and the agent starts without
it.

A provider name is the plugin's for the whole agent: two plugins registering the same one,
or one named like a built-in provider (``anthropic``, ``openai``) or ``tier``, is a failure.

A plugin tool with the name of an executor's tool replaces it for the agent (local tools win a
name, see :mod:`..tools.local`): plugins are trusted like the agent's own code."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from switchboard.errors import PluginError
from switchboard.plugins import (
    EntryPoints,
    LoadedPlugin,
    PluginReport,
    PluginSettings,
    discover,
    failed,
    installed,
    run_setup,
)
from switchboard.toolspec import ToolSpec, check_groups

from ..providers.plugin import BUILTIN, NAME, PluginProvider, ProviderFactory
from ..tools.client import CallRequest, CallResult
from ..tools.local import LocalContext, LocalTool, tool_error
from .hooks import Hook, HookName, Hooks

log = logging.getLogger(__name__)

AGENT_KINDS = ("tools", "hooks", "providers")
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what both providers accept


class AgentPluginApi:
    """Given to a plugin's ``setup``: its validated configuration and the ``register_*``
    methods of what its manifest provides."""

    def __init__(self, loaded: LoadedPlugin) -> None:
        self.name = loaded.manifest.name
        self.config: dict[str, Any] = loaded.config
        self.log = logging.getLogger(f"switchboard.plugin.{self.name}")
        self._provides = loaded.manifest.provides
        self.tools: list[LocalTool] = []
        self.hooks: list[tuple[HookName, Hook]] = []
        self.channels: dict[str, Any] = {}
        self.providers: dict[str, PluginProvider] = {}

    def register_tool(self, tool: LocalTool) -> None:
        """An agent-local tool: ``spec`` (name, description, JSON Schema of the arguments, the
        policy groups it is in: ``group:<name>`` entries match it by them) and
        ``async run(ctx, call) -> CallResult``."""
        self._needs("tools")
        spec = tool.spec
        if not isinstance(spec, ToolSpec) or not TOOL_NAME.fullmatch(spec.name):
            raise PluginError("a tool's spec needs a name of 1-64 of A-Z a-z 0-9 _ -")
        # Imported by a plugin's tool only: jsonschema is not needed at start otherwise.
        from jsonschema import Draft202012Validator, SchemaError

        try:
            Draft202012Validator.check_schema(spec.parameters)
        except SchemaError:
            raise PluginError(f"the tool {spec.name}'s parameters are not a JSON Schema") from None
        if spec.parameters.get("type") != "object":
            raise PluginError(f"the tool {spec.name}'s parameters must be an object schema")
        try:
            check_groups(spec)
        except ValueError as exc:
            raise PluginError(str(exc)) from None
        self.tools.append(tool)

    def register_hook(self, event: str, hook: Hook) -> None:
        """``hook`` (an async function) for ``event`` (:class:`~.hooks.HookName`)."""
        self._needs("hooks")
        try:
            Hooks().register(self.name, event, hook)  # the same checks as the real registry
        except ValueError as exc:
            raise PluginError(str(exc)) from None
        self.hooks.append((HookName(event), hook))

    def register_channel(self, name: str, adapter: Any) -> None:
        """The gateway's (it serves the channel): recorded, unused in the agent."""
        self._needs("channels")
        self.channels[name] = adapter

    def register_provider(self, name: str, factory: ProviderFactory) -> None:
        """A model provider: ``name:<model>`` becomes a model reference (``SB_MODEL``,
        ``SB_MODEL_FALLBACKS``, ``SB_MODEL_TIERS``, ``SB_AGENT_MODELS``, ``/model``).
        ``factory(model, config) -> Model`` gets the part after ``name:`` and this plugin's
        configuration and returns a :class:`~..providers.base.Model` (``provider``, ``model``,
        ``stream(request)``: :class:`~..providers.base.TextDelta` items, then one
        :class:`~..providers.base.ModelResponse`); see :mod:`..providers.plugin`. ``name``: 1-32
        of a-z 0-9 _ - (starting with a letter or digit), not ``anthropic``, ``openai`` or
        ``tier``."""
        self._needs("providers")
        if not NAME.fullmatch(name) or name in BUILTIN:
            raise PluginError(
                f"the provider name {name!r} is not allowed (1-32 of a-z 0-9 _ -, not "
                f"{', '.join(BUILTIN)})"
            )
        if not callable(factory):
            raise PluginError(f"the provider {name}'s factory is not callable")
        self.providers[name] = PluginProvider(self.name, name, factory, self.config)

    def _needs(self, kind: str) -> None:
        if kind not in self._provides:
            raise PluginError(f"it registers {kind} but its manifest does not provide them")


@dataclass
class Plugins:
    tools: list[LocalTool] = field(default_factory=list)
    reports: list[PluginReport] = field(default_factory=list)
    providers: dict[str, PluginProvider] = field(default_factory=dict)

    def note(self, problems: Mapping[str, str]) -> None:
        """Add ``problems`` (plugin -> what went wrong after it loaded) to the reports."""
        for name, detail in problems.items():
            _note(self, name, detail)

    def details(self) -> dict[str, Any]:
        """Each enabled plugin's state, for ``/readyz``."""
        return {r.name: r.as_dict() for r in self.reports}


async def load_plugins(
    settings: PluginSettings,
    hooks: Hooks,
    reserved: Collection[str],
    tool_timeout_s: float,
    found: EntryPoints = installed,
) -> Plugins:
    """Set up every enabled plugin; register the hooks of those that succeed on ``hooks`` and
    return their tools (wrapped with a deadline) and a report on each. ``reserved``: the
    names of the agent's own local tools, which a plugin's tool may not take."""
    loaded, reports = discover(settings, found, AGENT_KINDS)
    out = Plugins(reports=reports)
    taken = set(reserved)
    for plugin in loaded:
        name = plugin.manifest.name
        api = AgentPluginApi(plugin)
        try:
            await run_setup(plugin.plugin, api, name)
            clash = next((t.spec.name for t in api.tools if t.spec.name in taken), None)
            if clash is not None:
                raise PluginError(f"its tool {clash!r} has the name of another tool")
            shared = next((p for p in api.providers if p in out.providers), None)
            if shared is not None:
                raise PluginError(f"its provider {shared!r} is another plugin's")
        except PluginError as exc:
            _failed(out, name, str(exc))
            continue
        for event, hook in api.hooks:
            hooks.register(name, event, hook)
        for tool in api.tools:
            taken.add(tool.spec.name)
            out.tools.append(_PluginTool(name, tool, tool_timeout_s))
        out.providers.update(api.providers)
        log.info(
            "plugin %s loaded",
            name,
            extra={
                "plugin": name,
                "version": plugin.manifest.version,
                "tools": [t.spec.name for t in api.tools],
                "hooks": [str(e) for e, _ in api.hooks],
                "providers": sorted(api.providers),
            },
        )
    return out


def _failed(out: Plugins, name: str, detail: str) -> None:
    out.reports = failed(out.reports, name, detail)


def _note(out: Plugins, name: str, detail: str) -> None:
    out.reports = [replace(r, detail=detail) if r.name == name else r for r in out.reports]


class _PluginTool:
    """A plugin's tool with a deadline; its exceptions become tool errors in LocalTools."""

    def __init__(self, plugin: str, tool: LocalTool, timeout_s: float) -> None:
        self.plugin = plugin
        self.tool = tool
        self.timeout_s = timeout_s
        self._spec = tool.spec

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await self.tool.run(ctx, call)
        except TimeoutError:
            return tool_error(
                call, f"{call.name} did not finish within {self.timeout_s:g}s.", "timeout"
            )
        if not isinstance(result, CallResult):
            log.error("the tool %s of plugin %s returned no CallResult", call.name, self.plugin)
            return tool_error(call, f"{call.name} failed (no result).", "tool_error")
        return result
