"""Model providers from plugins: ``api.register_provider(name, factory)`` makes ``name:<model>``
a model reference like ``openai:<model>`` (``SB_MODEL``, ``SB_MODEL_FALLBACKS``, tiers,
``SB_AGENT_MODELS``, ``/model``).

``factory(model, config)`` gets the part of the reference after ``name:`` and the plugin's
validated configuration, and returns a :class:`~.base.Model` (``provider``, ``model`` and
``stream(request)``, an async iterator of :class:`~.base.TextDelta` then one
:class:`~.base.ModelResponse`). It is called once per reference (the model is reused), off the
event loop, when the agent starts (for the configured chain) or when a session picks it.

The plugin's code never takes the agent down: a factory that raises, or returns no model, and a
model whose call raises anything but a :class:`~.errors.ModelError` (or yields what is not a
delta or a response) become a :class:`~.errors.ModelUnavailableError`, which the failover
treats like a built-in provider's outage (the next model of the chain answers; the model rests
``SB_MODEL_COOLDOWN_S``). A plugin's model may raise the other ``ModelError`` kinds itself
(rate limit with ``retry_after_s``, auth, context overflow) to get their handling. A model
that stays silent longer than ``SB_MODEL_TIMEOUT_S`` (for its first item or between two) is
an outage too. The factory runs when the agent starts: it must return promptly."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .base import Model, ModelRequest, ModelResponse, TextDelta
from .errors import ModelError, ModelUnavailableError

__all__ = ["BUILTIN", "NAME", "PluginModel", "PluginProvider", "ProviderFactory"]
log = logging.getLogger(__name__)

ProviderFactory = Callable[[str, Mapping[str, Any]], Model]
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# Names a plugin's provider may not take: the built-in providers and the tier prefix.
BUILTIN = ("anthropic", "openai", "tier")


@dataclass(frozen=True)
class PluginProvider:
    plugin: str
    name: str
    factory: ProviderFactory = field(repr=False)
    config: Mapping[str, Any] = field(repr=False)

    def build(self, model: str, timeout_s: float = 120.0) -> Model:
        """The plugin's model for ``name:model``; :class:`ModelUnavailableError` when the
        factory fails (the traceback goes to the log, the reason fits a reply)."""
        ref = f"{self.name}:{model}"
        try:
            built = self.factory(model, self.config)
        except Exception as exc:  # a plugin's failure must not stop the agent
            log.error("the plugin %s failed to build the model %s", self.plugin, ref, exc_info=exc)
            raise ModelUnavailableError(
                f"The model {ref} (plugin {self.plugin}) could not be set up "
                f"({type(exc).__name__}).",
                provider=self.name,
            ) from None
        if not callable(getattr(built, "stream", None)):
            log.error("the plugin %s returned no model for %s", self.plugin, ref)
            raise ModelUnavailableError(
                f"The model {ref} (plugin {self.plugin}) could not be set up (not a model).",
                provider=self.name,
            )
        return PluginModel(self, model, built, timeout_s)


class PluginModel:
    """A plugin's model behind the agent's rules: anything it raises or yields wrongly is a
    :class:`ModelUnavailableError` (its own :class:`ModelError` kinds pass through)."""

    def __init__(
        self, provider: PluginProvider, model: str, inner: Model, timeout_s: float = 120.0
    ) -> None:
        self.timeout_s = timeout_s
        self.plugin = provider.plugin
        self.provider = provider.name
        self.model = model
        self.inner = inner

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        ref = f"{self.provider}:{self.model}"
        try:
            items = aiter(self.inner.stream(request))
            while True:
                try:
                    async with asyncio.timeout(self.timeout_s):
                        item = await anext(items)
                except StopAsyncIteration:
                    return
                if not isinstance(item, TextDelta | ModelResponse):
                    raise TypeError(f"yielded a {type(item).__name__}")
                yield item
        except ModelError:
            raise
        except TimeoutError:
            log.error("the model %s of plugin %s timed out", ref, self.plugin)
            raise ModelUnavailableError(
                f"The model {ref} did not answer within {self.timeout_s:g}s.",
                provider=self.provider,
            ) from None
        except Exception as exc:  # a plugin's failure must not stop the agent
            log.error("the model %s of plugin %s failed", ref, self.plugin, exc_info=exc)
            raise ModelUnavailableError(
                f"The model {ref} failed ({type(exc).__name__}).", provider=self.provider
            ) from None
