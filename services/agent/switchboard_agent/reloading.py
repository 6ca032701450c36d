"""What the agent takes from a changed configuration file without a restart
(:data:`switchboard.configfile.reload.RELOADABLE`): the model chain (SB_MODEL, its fallbacks,
tiers and per-agent models), the budgets (SB_BUDGET, SB_PRICES), and the tool policies and
approval rules (SB_TOOL_POLICY, SB_AGENT_TOOL_POLICIES, SB_SUBAGENT_TOOL_POLICY,
SB_TOOL_APPROVALS, SB_GROUP_TOOL_PROFILE). A run already going on finishes with the chain it
started with; the next one uses the new values; the tool rules apply from the next tool call.
A new chain that does not resolve (choose_router logs why) leaves the running one in place."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from .approvals.toolgate import ToolRules
from .config import AgentSettings
from .providers.failover_config import choose_router
from .providers.plugin import PluginProvider
from .runs.budget import Accounting
from .runs.runner import Runner
from .sessions.models import SessionModels

log = logging.getLogger(__name__)


class Ruled(Protocol):
    """What reads the tool rules at each call (the tool gate, the ToolAccess service, the
    compactor's memory flush): each keeps them in ``rules``."""

    rules: ToolRules


def reload_tool_rules(settings: AgentSettings, holders: Iterable[Ruled]) -> ToolRules:
    """The new policies and approval rules to every holder. ``settings`` passed their
    validator (it builds the same rules), so this does not fail halfway."""
    rules = settings.tool_rules()
    for holder in holders:
        holder.rules = rules
    return rules


class AgentReload:
    def __init__(
        self,
        runner: Runner,
        models: SessionModels,
        accounting: Accounting,
        plugins: Mapping[str, PluginProvider],
        ruled: Sequence[Ruled] = (),
    ) -> None:
        self.runner = runner
        self.models = models
        self.accounting = accounting
        self.plugins = plugins
        self.ruled = ruled

    async def __call__(self, settings: AgentSettings) -> None:
        self.accounting.budget = settings.budget
        self.accounting.prices = settings.prices
        reload_tool_rules(settings, self.ruled)  # before the chain, which may keep the old one
        # Building the chain may load a provider's SDK: off the event loop, as at start.
        model, no_model_reply = await asyncio.to_thread(
            choose_router, settings, settings, self.plugins
        )
        if model is None and self.runner.model is not None:
            # A chain the settings classes accept may still not resolve (a provider without
            # its key): answering "no model" from now on would be worse than keeping it.
            log.error("the new model chain is not usable, keeping the running one")
            return
        self.runner.model = model
        self.runner.no_model_reply = no_model_reply
        self.models.replace_default(model)
        log.info("model chain and budgets reloaded", extra={"model": self.models.default_ref})
