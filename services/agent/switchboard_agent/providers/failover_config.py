"""Settings of model failover, and the router they build (see providers/failover.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pydantic import Field

from switchboard.settings import ModelSettings, Settings

from .chain import PROVIDERS, resolve_chain
from .failover import ModelRouter, RouterTuning
from .plugin import PluginProvider
from .profiles import AuthProfile, Cooldowns, ProfileEntry, build_profiles
from .select import NO_MODEL_MESSAGE

__all__ = ["FailoverSettings", "choose_router"]
log = logging.getLogger(__name__)


class FailoverSettings(Settings):
    # JSON list of `provider:model` (or tiers) tried in order after the primary.
    model_fallbacks: list[str] = Field(default_factory=list)
    # {"fast"|"standard"|"powerful": "provider:model"}; SB_MODEL=tier:fast picks one.
    model_tiers: dict[str, str] = Field(default_factory=dict)
    # {"<agent>": "provider:model" | "<tier>"}: an agent's own primary model.
    agent_models: dict[str, str] = Field(default_factory=dict)
    # {"anthropic"|"openai": [{"name", "api_key", "base_url"}]}: more credentials per
    # provider, tried after the usual variable's ("default") when one is refused.
    auth_profiles: dict[str, list[ProfileEntry]] = Field(default_factory=dict)
    # The SDKs' own retries: 0, because a retry inside the SDK hides a 429 from the failover
    # (it would wait out retry-after on the failing model instead of moving on).
    model_sdk_retries: int = Field(default=0, ge=0, le=10)
    # The longest one model call may take.
    model_timeout_s: float = Field(default=120.0, gt=0)
    # A model answering 429/5xx without retry-after rests this long; a refused profile this
    # long (an hour); the longest wait for a resting model when no other can answer;
    # model calls one request may make in all (failovers, waits and the overflow retry).
    model_cooldown_s: float = Field(default=5.0, ge=0)
    # How long a profile whose key was refused (401/403) rests.
    auth_cooldown_s: float = Field(default=3600.0, ge=0)
    # The longest wait for a resting model when no other can answer (a longer retry-after fails at
    # once).
    failover_max_wait_s: float = Field(default=30.0, ge=0)
    # Model calls one request may make in all (failovers, waits and the overflow retry).
    model_max_attempts: int = Field(default=6, ge=1, le=50)


def choose_router(
    settings: ModelSettings,
    failover: FailoverSettings,
    plugins: Mapping[str, PluginProvider] | None = None,
) -> tuple[ModelRouter | None, str]:
    """The configured model chain behind one router, or None and the reply that explains how
    to configure a model (the configuration error first, when there is one). ``plugins``: the
    model providers of the loaded plugins (each with one credential-less profile, ``plugin``);
    a reference to a provider no loaded plugin registered is an unknown provider."""
    plugins = plugins or {}
    try:
        profiles = build_profiles(
            {
                "anthropic": (
                    settings.anthropic_api_key.get_secret_value().strip() or None,
                    settings.anthropic_base_url.strip() or None,
                ),
                "openai": (
                    settings.openai_api_key.get_secret_value().strip() or None,
                    settings.openai_base_url.strip() or None,
                ),
            },
            failover.auth_profiles,
            PROVIDERS,
        )
        for name in plugins:
            profiles[name] = [AuthProfile(name, "plugin", "", None)]
        chain = resolve_chain(
            settings.model,
            failover.model_tiers,
            failover.agent_models,
            failover.model_fallbacks,
            profiles,
            plugins,
        )
    except ValueError as exc:
        log.error("invalid model configuration: %s", exc)
        return None, f"The model configuration is invalid: {exc}\n\n{NO_MODEL_MESSAGE}"
    if chain is None:
        log.warning("no model configured; every reply will say how to configure one")
        return None, NO_MODEL_MESSAGE
    tuning = RouterTuning(
        sdk_retries=failover.model_sdk_retries,
        timeout_s=failover.model_timeout_s,
        cooldown_s=failover.model_cooldown_s,
        auth_cooldown_s=failover.auth_cooldown_s,
        max_wait_s=failover.failover_max_wait_s,
        max_attempts=failover.model_max_attempts,
    )
    log.info(
        "models configured",
        extra={
            "chain": list(chain.default),
            "profiles": {p: [x.name for x in ps] for p, ps in profiles.items()},
        },
    )
    router = ModelRouter(chain, profiles, tuning, Cooldowns(), plugins=plugins)
    router.warm()  # the plugins' models now, off the event loop (the SDKs' on first use)
    return router, NO_MODEL_MESSAGE
