"""What the agent takes from a changed configuration file without a restart
(:data:`switchboard.configfile.reload.RELOADABLE`): the model chain (SB_MODEL, its fallbacks,
tiers and per-agent models) and the budgets (SB_BUDGET, SB_PRICES). A run already going on
finishes with the chain it started with; the next one uses the new values. A new chain that does
not resolve (choose_router logs why) leaves the running one in place."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from .config import AgentSettings
from .providers.failover_config import choose_router
from .providers.plugin import PluginProvider
from .runs.budget import Accounting
from .runs.runner import Runner
from .sessions.models import SessionModels

log = logging.getLogger(__name__)


class AgentReload:
    def __init__(
        self,
        runner: Runner,
        models: SessionModels,
        accounting: Accounting,
        plugins: Mapping[str, PluginProvider],
    ) -> None:
        self.runner = runner
        self.models = models
        self.accounting = accounting
        self.plugins = plugins

    async def __call__(self, settings: AgentSettings) -> None:
        self.accounting.budget = settings.budget
        self.accounting.prices = settings.prices
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
