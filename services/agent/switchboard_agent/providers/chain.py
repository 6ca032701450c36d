"""Which models an agent uses, in order: its primary, then ``SB_MODEL_FALLBACKS``.

A model reference is ``provider:model`` or a tier: ``tier:fast`` (or just ``fast``) looks the
tier up in ``SB_MODEL_TIERS`` (``{"fast": "openai:gpt-4o-mini", "standard": ..., "powerful":
...}``). The primary is ``SB_AGENT_MODELS[agent]`` when set, else ``SB_MODEL``, else the
provider default (Anthropic's key wins over OpenAI's, as before).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from .profiles import KEYLESS_API_KEY, AuthProfile

__all__ = ["TIERS", "ModelChain", "parse_ref", "resolve_chain"]

TIERS = ("fast", "standard", "powerful")
PROVIDERS = ("anthropic", "openai")
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}


@dataclass(frozen=True)
class ModelChain:
    """The refs (``provider:model``) tried for an agent, primary first."""

    default: tuple[str, ...]
    per_agent: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def refs(self, agent: str) -> tuple[str, ...]:
        return self.per_agent.get(agent, self.default)


def parse_ref(ref: str, what: str, plugins: Collection[str] = ()) -> tuple[str, str]:
    """``provider:model`` -> (provider, model); ValueError naming ``what`` otherwise.
    ``plugins``: the providers the enabled plugins registered."""
    provider, sep, model = ref.strip().partition(":")
    provider, model = provider.strip().lower(), model.strip()
    if not sep or not provider or not model:
        raise ValueError(
            f"{what}: invalid model reference {ref!r}: expected 'provider:model' (e.g. "
            f"'openai:gpt-4o-mini') or a tier ({', '.join(TIERS)}) set in SB_MODEL_TIERS"
        )
    if provider not in PROVIDERS and provider not in plugins:
        raise ValueError(
            f"{what}: unknown model provider {provider!r} in {ref!r}: use one of "
            f"{', '.join([*PROVIDERS, *sorted(plugins)])} (OpenRouter, Ollama, vLLM, Groq... "
            "are 'openai' with OPENAI_BASE_URL; a plugin's provider needs its plugin in "
            "SB_PLUGINS, loaded)"
        )
    return provider, model


def _resolve(
    ref: str,
    what: str,
    tiers: Mapping[str, str],
    profiles: Mapping[str, Sequence[AuthProfile]],
    plugins: Collection[str],
) -> str:
    text = ref.strip()
    name = text.removeprefix("tier:").strip()
    if text.startswith("tier:") or (":" not in text and name in tiers):
        if name not in tiers:
            raise ValueError(
                f"{what}: tier {name!r} is not set in SB_MODEL_TIERS "
                f'(set e.g. SB_MODEL_TIERS=\'{{"{name}": "openai:gpt-4o-mini"}}\')'
            )
        text = tiers[name]
        what = f"SB_MODEL_TIERS.{name}"
    provider, model = parse_ref(text, what, plugins)
    if not profiles.get(provider):
        needs = (
            "ANTHROPIC_API_KEY"
            if provider == "anthropic"
            else "OPENAI_API_KEY (or OPENAI_BASE_URL for a local server such as Ollama)"
        )
        raise ValueError(
            f"{what}: model '{provider}:{model}' needs {needs} or an SB_AUTH_PROFILES entry "
            f"for {provider}, and none is set"
        )
    return f"{provider}:{model}"


def _default_primary(profiles: Mapping[str, Sequence[AuthProfile]]) -> str | None:
    for provider in PROVIDERS:
        if any(p.api_key != KEYLESS_API_KEY for p in profiles.get(provider, ())):
            return f"{provider}:{DEFAULT_MODELS[provider]}"
    return None


def resolve_chain(
    model: str,
    tiers: Mapping[str, str],
    agent_models: Mapping[str, str],
    fallbacks: Sequence[str],
    profiles: Mapping[str, Sequence[AuthProfile]],
    plugins: Collection[str] = (),
) -> ModelChain | None:
    """The chains of every agent; None when no model is configured. ValueError (with the
    setting to fix) for a bad reference or a model whose provider has no credentials.
    ``plugins``: the providers of the loaded plugins (each needs one profile in ``profiles``)."""
    unknown = sorted(set(tiers) - set(TIERS))
    if unknown:
        raise ValueError(
            f"SB_MODEL_TIERS: unknown tier(s) {', '.join(unknown)}; use {', '.join(TIERS)}"
        )
    primary = (
        _resolve(model, "SB_MODEL", tiers, profiles, plugins)
        if model.strip()
        else _default_primary(profiles)
    )
    if primary is None:
        if agent_models:
            raise ValueError("SB_AGENT_MODELS needs SB_MODEL (or a provider key) for other agents")
        return None
    tail = [_resolve(f, "SB_MODEL_FALLBACKS", tiers, profiles, plugins) for f in fallbacks]

    def chain(first: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys([first, *tail]))

    per_agent = {
        agent: chain(_resolve(ref, f"SB_AGENT_MODELS.{agent}", tiers, profiles, plugins))
        for agent, ref in agent_models.items()
    }
    return ModelChain(chain(primary), per_agent)
