"""Settings of the ``a2a_delegate`` tool, mixed into ``switchboard_tools.config.ToolsSettings``.

``SB_A2A_AGENTS`` is JSON: ``{"<name>": {"url": "https://peer.example", "token": "...",
"description": "..."}}``; ``url`` is the agent's base URL (its card is at the well-known path
beneath it), ``token`` (optional) is sent as ``Authorization: Bearer`` to that host only."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class A2AAgent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    url: str
    token: SecretStr | None = None
    description: str = Field(default="", max_length=200)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


class A2ASettings(BaseSettings):
    # The values hold tokens: a refused one is never echoed in the error's text.
    model_config = SettingsConfigDict(
        env_prefix="SB_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    # Remote A2A agents a2a_delegate may reach, JSON {"<name>": {"url", "token"?, "description"?}}
    # (secret: it holds tokens).
    a2a_agents: dict[str, A2AAgent] = Field(default_factory=dict)
    # Seconds one delegation may take (card, message, polling), within the call's own timeout.
    a2a_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    # Characters of a peer's answer shown to the model.
    a2a_max_answer_chars: int = Field(default=20_000, ge=100, le=1_000_000)
    # Bytes of one response a peer may send (its card, a JSON-RPC answer); more is an error.
    a2a_max_response_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)

    @field_validator("a2a_agents")
    @classmethod
    def _names(cls, value: dict[str, A2AAgent]) -> dict[str, A2AAgent]:
        for name in value:
            if not _NAME.fullmatch(name):
                raise ValueError(
                    f"SB_A2A_AGENTS: agent name {name!r} must be 1-64 of A-Z a-z 0-9 _ -"
                )
        return value
