"""A session's own model (``/model provider:model`` in a chat, ``model`` in Sessions.Patch):
checked against what is configured when it is set (the provider has its key or base URL, and
the model is the configured one or in ``SB_MODEL_CHOICES`` when that list is given), built
once per reference and reused by every run of every session that picked it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from switchboard.settings import ModelSettings

from ..providers.base import Model
from ..providers.errors import ModelUnavailableError
from ..providers.plugin import PluginProvider
from ..providers.select import ModelConfig, build_model, resolve_model_config

log = logging.getLogger(__name__)


class ModelChoiceError(ValueError):
    """The reference cannot be a session's model; the message says why, for the user."""


class SessionModels:
    def __init__(
        self,
        settings: ModelSettings,
        default: Model | None,
        choices: list[str] | None = None,
        plugins: Mapping[str, PluginProvider] | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.settings = settings
        self.timeout_s = timeout_s  # SB_MODEL_TIMEOUT_S, as the configured chain's models
        self.plugins = dict(plugins or {})  # the model providers of the loaded plugins
        self.default = default
        self.allowed = [c.strip() for c in choices or [] if c.strip()]
        self._built: dict[str, Model] = {}
        if default is not None:
            self._built[self.default_ref] = default

    def replace_default(self, default: Model | None) -> None:
        """The configured model changed (the configuration file): sessions without a model
        of their own use ``default`` from their next run; models built for overrides stay."""
        if self.default is not None:
            self._built.pop(self.default_ref, None)
        self.default = default
        if default is not None:
            self._built[self.default_ref] = default

    @property
    def default_ref(self) -> str:
        return f"{self.default.provider}:{self.default.model}" if self.default else ""

    def choices(self) -> list[str]:
        """What ``/model`` offers: the configured model, then the listed ones."""
        return list(dict.fromkeys([r for r in [self.default_ref, *self.allowed] if r]))

    def check(self, ref: str) -> str:
        """``ref`` normalised (``provider:model``), or :class:`ModelChoiceError`."""
        return self._config(ref).ref

    def _config(self, ref: str) -> ModelConfig:
        if self.default is None:
            raise ModelChoiceError("No model is configured, so there is none to switch to.")
        s = self.settings
        provider, sep, model = ref.strip().partition(":")
        plugin = self.plugins.get(provider.strip().lower())
        if plugin is not None and sep and model.strip():
            config: ModelConfig | None = ModelConfig(plugin.name, model.strip(), "", None)
        else:
            try:
                config = resolve_model_config(
                    ref,
                    s.anthropic_api_key.get_secret_value() or None,
                    s.anthropic_base_url or None,
                    s.openai_api_key.get_secret_value() or None,
                    s.openai_base_url or None,
                )
            except ValueError as exc:
                raise ModelChoiceError(str(exc)) from None
        if config is None:
            raise ModelChoiceError("Give a model as provider:model, e.g. openai:gpt-4o-mini.")
        if self.allowed and config.ref not in self.choices():
            raise ModelChoiceError(
                f"{config.ref} is not one of the models this assistant offers: "
                f"{', '.join(self.choices())}."
            )
        return config

    async def get(self, ref: str) -> Model | None:
        """The model of a session whose override is ``ref`` ("" : the configured one). An
        override that stopped being valid (the configuration changed) falls back to it."""
        if not ref or self.default is None:
            return self.default
        model = self._built.get(ref)
        if model is not None:
            return model
        try:
            config = self._config(ref)
        except ModelChoiceError as exc:
            log.warning("a session's model is no longer usable, using the default: %s", exc)
            return self.default
        # Building loads the provider's SDK the first time (up to a second): off the loop.
        plugin = self.plugins.get(config.provider)
        try:
            if plugin is not None:
                model = await asyncio.to_thread(plugin.build, config.model, self.timeout_s)
            else:
                model = await asyncio.to_thread(build_model, config, timeout_s=self.timeout_s)
        except ModelUnavailableError as exc:  # the plugin's factory failed (logged)
            log.warning("a session's model cannot be built, using the default: %s", exc)
            return self.default
        self._built[ref] = model
        return model
