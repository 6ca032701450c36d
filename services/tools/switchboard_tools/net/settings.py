"""Settings of the web tools (``web_fetch``, ``web_search``), mixed into
:class:`switchboard_tools.config.ToolsSettings`; read from ``SB_*`` environment variables."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_FETCH_MAX_BYTES = 2 * 1024 * 1024


class WebSettings(BaseSettings):
    """``web_fetch`` limits and allow-list, and the ``web_search`` provider.

    List settings are JSON in the environment, e.g.
    ``SB_WEB_FETCH_ALLOW_CIDRS='["10.20.0.0/16"]'``.
    """

    model_config = SettingsConfigDict(env_prefix="SB_", extra="ignore", frozen=True)

    # Networks web_fetch may reach even though the SSRF guard would refuse them (an internal
    # docs host, say). Empty by default: only public addresses are fetched.
    web_fetch_allow_cidrs: list[str] = Field(default_factory=list)
    # The largest body web_fetch reads.
    web_fetch_max_bytes: int = Field(default=DEFAULT_FETCH_MAX_BYTES, ge=1024, le=64 * 1024 * 1024)
    # Redirects web_fetch follows (each checked by the SSRF guard).
    web_fetch_max_redirects: int = Field(default=5, ge=0, le=20)
    # The longest one web_fetch may take.
    web_fetch_timeout_s: float = Field(default=30.0, gt=0, le=600)
    # How long a fetched page is reused from the cache.
    web_fetch_cache_ttl_s: float = Field(default=86400.0, ge=0)
    # Pages the web_fetch cache keeps.
    web_fetch_cache_entries: int = Field(default=256, ge=0, le=100_000)

    # The web_search backend (tavily, brave, searxng); unset: the tool says how to configure one.
    web_search_provider: Literal["tavily", "brave", "searxng"] | None = None
    # The longest one web_search may take.
    web_search_timeout_s: float = Field(default=20.0, gt=0, le=600)
    # Tavily's API key (SB_WEB_SEARCH_PROVIDER=tavily).
    tavily_api_key: SecretStr | None = None
    # Tavily's API base URL.
    tavily_base_url: str = "https://api.tavily.com"
    # Brave Search's API key (SB_WEB_SEARCH_PROVIDER=brave).
    brave_api_key: SecretStr | None = None
    # Brave Search's API base URL.
    brave_base_url: str = "https://api.search.brave.com"
    # The SearXNG instance's base URL (SB_WEB_SEARCH_PROVIDER=searxng).
    searxng_url: str | None = None

    @field_validator("web_fetch_allow_cidrs")
    @classmethod
    def _valid_cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError as exc:
                raise ValueError(f"SB_WEB_FETCH_ALLOW_CIDRS: {cidr!r} is not a CIDR") from exc
        return value

    @field_validator("tavily_base_url", "brave_base_url", "searxng_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value
