"""Auth profiles (several credentials per provider) and the cooldowns of failed ones.

A provider's profiles are tried in order: first the key of the usual variable
(``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` with its base URL, named ``default``), then the ones
of ``SB_AUTH_PROFILES``. Cooldowns live in this replica's memory: a profile or model that failed
is skipped until its cooldown ends (another replica learns the same from its own first failure).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, SecretStr

__all__ = ["AuthProfile", "Cooldowns", "ProfileEntry", "build_profiles"]

KEYLESS_API_KEY = "not-needed"  # OpenAI-compatible servers without auth (Ollama, vLLM)


class ProfileEntry(BaseModel):
    """One entry of ``SB_AUTH_PROFILES``: ``{"name", "api_key", "base_url"}`` (``base_url``
    defaults to the provider's usual one, ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    api_key: SecretStr = SecretStr("")
    base_url: str = ""


@dataclass(frozen=True)
class AuthProfile:
    provider: str
    name: str
    api_key: str = field(repr=False)  # never in logs, events or spans
    base_url: str | None

    @property
    def key(self) -> str:
        """``provider/name``: how events, spans and logs name the profile (never the key)."""
        return f"{self.provider}/{self.name}"


def build_profiles(
    defaults: Mapping[str, tuple[str | None, str | None]],
    extra: Mapping[str, Sequence[ProfileEntry]],
    providers: Sequence[str],
) -> dict[str, list[AuthProfile]]:
    """Each provider's profiles, in the order they are tried.

    ``defaults`` maps a provider to its usual (key, base URL); ``extra`` is ``SB_AUTH_PROFILES``.
    An OpenAI profile with a base URL and no key is valid (a local server). Raises ValueError
    for an unknown provider, a duplicate name or a profile without key (Anthropic).
    """
    unknown = sorted(set(extra) - set(providers))
    if unknown:
        raise ValueError(
            f"SB_AUTH_PROFILES: unknown provider(s) {', '.join(unknown)}; use "
            f"{', '.join(providers)}"
        )
    out: dict[str, list[AuthProfile]] = {}
    for provider in providers:
        profiles: list[AuthProfile] = []
        key, url = defaults.get(provider, (None, None))
        if key or (provider == "openai" and url):
            profiles.append(AuthProfile(provider, "default", key or KEYLESS_API_KEY, url))
        for entry in extra.get(provider, ()):
            name = entry.name.strip()
            secret = entry.api_key.get_secret_value().strip()
            base = entry.base_url.strip() or url  # default: the provider's usual base URL
            if not name or any(p.name == name for p in profiles):
                raise ValueError(
                    f"SB_AUTH_PROFILES.{provider}: every profile needs its own non-empty name "
                    f"({name or 'empty'!r} is taken or empty; 'default' is the usual variable's)"
                )
            if not secret and not (provider == "openai" and base):
                raise ValueError(f"SB_AUTH_PROFILES.{provider}.{name}: api_key is empty")
            profiles.append(AuthProfile(provider, name, secret or KEYLESS_API_KEY, base))
        if profiles:
            out[provider] = profiles
    return out


class Cooldowns:
    """Things (profiles, models) that must not be used before a time; monotonic clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._until: dict[str, float] = {}
        self._clock = clock

    def cool(self, key: str, seconds: float) -> None:
        until = self._clock() + max(0.0, seconds)
        self._until[key] = max(until, self._until.get(key, 0.0))

    def remaining(self, key: str) -> float:
        """Seconds left of ``key``'s cooldown (0: usable)."""
        until = self._until.get(key)
        if until is None:
            return 0.0
        left = until - self._clock()
        if left <= 0:
            del self._until[key]
            return 0.0
        return left
