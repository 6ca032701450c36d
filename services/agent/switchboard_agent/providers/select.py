"""Choosing the model from configuration (SB_MODEL and the provider keys)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from switchboard.settings import ModelSettings

from .base import Model

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "NO_MODEL_MESSAGE",
    "PROVIDERS",
    "ModelConfig",
    "build_model",
    "choose_model",
    "resolve_model_config",
]
log = logging.getLogger(__name__)

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
PROVIDERS = ("anthropic", "openai")
KEYLESS_API_KEY = "not-needed"  # for OpenAI-compatible servers without auth (Ollama, vLLM)

NO_MODEL_MESSAGE = (
    "No AI model is configured yet, so I can't answer. To set one up, do one of:\n"
    f"- set ANTHROPIC_API_KEY (uses {DEFAULT_ANTHROPIC_MODEL} by default), or\n"
    f"- set OPENAI_API_KEY (uses {DEFAULT_OPENAI_MODEL} by default); add OPENAI_BASE_URL "
    "to use an OpenAI-compatible server such as Ollama, vLLM or OpenRouter, and\n"
    "- optionally set SB_MODEL=provider:model to pick the model, e.g. "
    "SB_MODEL=anthropic:claude-sonnet-4-5, SB_MODEL=openai:gpt-4o-mini, or "
    "SB_MODEL=openai:llama3.2 with OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama.\n"
    "Then restart `switchboard up`."
)


@dataclass(frozen=True)
class ModelConfig:
    provider: str
    model: str
    api_key: str = field(repr=False)  # never in logs
    base_url: str | None

    @property
    def ref(self) -> str:
        """``provider:model``."""
        return f"{self.provider}:{self.model}"


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def resolve_model_config(
    model_ref: str | None,
    anthropic_api_key: str | None,
    anthropic_base_url: str | None,
    openai_api_key: str | None,
    openai_base_url: str | None,
) -> ModelConfig | None:
    """Pick provider, model and credentials; None when nothing is configured.

    ``model_ref`` ("provider:model", e.g. "openai:gpt-4o-mini") picks provider and model; that
    provider must be configured (an OpenAI base URL without key is fine: local servers). Without
    it, ANTHROPIC_API_KEY wins over OPENAI_API_KEY, each with its default model. Empty strings
    count as unset. Raises ValueError for a malformed or unusable model_ref.
    """
    ref = _clean(model_ref)
    a_key, a_url = _clean(anthropic_api_key), _clean(anthropic_base_url)
    o_key, o_url = _clean(openai_api_key), _clean(openai_base_url)

    if ref is not None:
        provider, sep, model = ref.partition(":")
        provider, model = provider.strip().lower(), model.strip()
        if not sep or not provider or not model:
            raise ValueError(
                f"Invalid model reference {ref!r}: expected 'provider:model', "
                "e.g. 'anthropic:claude-sonnet-4-5' or 'openai:gpt-4o-mini'."
            )
        if provider == "anthropic":
            if a_key is None:
                raise ValueError(f"Model {ref!r} needs ANTHROPIC_API_KEY, which is not set.")
            return ModelConfig("anthropic", model, a_key, a_url)
        if provider == "openai":
            if o_key is None and o_url is None:
                raise ValueError(
                    f"Model {ref!r} needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
                    "OpenAI-compatible server such as Ollama), and neither is set."
                )
            return ModelConfig("openai", model, o_key or KEYLESS_API_KEY, o_url)
        raise ValueError(
            f"Unknown model provider {provider!r} in {ref!r}: use one of "
            f"{', '.join(PROVIDERS)} (OpenRouter, Ollama, vLLM, Groq... are 'openai' with "
            "OPENAI_BASE_URL)."
        )

    if a_key is not None:
        return ModelConfig("anthropic", DEFAULT_ANTHROPIC_MODEL, a_key, a_url)
    if o_key is not None:
        return ModelConfig("openai", DEFAULT_OPENAI_MODEL, o_key, o_url)
    return None


def build_model(cfg: ModelConfig, *, timeout_s: float = 120, max_retries: int = 2) -> Model:
    """Instantiate the Model for a config."""
    if cfg.provider == "anthropic":
        from .anthropic import AnthropicModel

        return AnthropicModel(
            cfg.model, cfg.api_key, cfg.base_url, timeout_s, max_retries=max_retries
        )
    if cfg.provider == "openai":
        from .openai import OpenAIChatModel

        return OpenAIChatModel(
            cfg.model, cfg.api_key, cfg.base_url, timeout_s, max_retries=max_retries
        )
    raise ValueError(f"Unknown model provider {cfg.provider!r}; use one of {', '.join(PROVIDERS)}.")


def choose_model(settings: ModelSettings) -> tuple[Model | None, str]:
    """The configured model, or None and the reply that explains how to configure one."""
    try:
        config = resolve_model_config(
            settings.model or None,
            settings.anthropic_api_key.get_secret_value() or None,
            settings.anthropic_base_url or None,
            settings.openai_api_key.get_secret_value() or None,
            settings.openai_base_url or None,
        )
    except ValueError as exc:
        log.error("invalid model configuration: %s", exc)
        return None, f"The model configuration is invalid: {exc}\n\n{NO_MODEL_MESSAGE}"
    if config is None:
        log.warning("no model configured; every reply will say how to configure one")
        return None, NO_MODEL_MESSAGE
    log.info("model configured", extra={"provider": config.provider, "model": config.model})
    return build_model(config), NO_MODEL_MESSAGE
