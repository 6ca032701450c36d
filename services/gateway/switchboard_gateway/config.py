"""Gateway settings."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from switchboard import tokens
from switchboard.sessions import AgentId
from switchboard.settings import CommonSettings, RpcSettings

# The most messages a chat request may ever hold: checked while the body is validated, so a
# request of many tiny messages is refused without building each (the setting is lower).
MESSAGES_CEILING = 10_000


class GatewaySettings(CommonSettings, RpcSettings):
    # A refused value (a weak token...) is never echoed in the error's text.
    model_config = SettingsConfigDict(hide_input_in_errors=True)

    http_host: str = "0.0.0.0"
    http_port: int = Field(default=8080, ge=0, le=65535)
    gateway_token: SecretStr = SecretStr("")
    agent_addr: str = "127.0.0.1:50051"
    router_addr: str = "127.0.0.1:50052"
    default_agent: AgentId = "main"
    reply_timeout_s: float = Field(default=300.0, gt=0)
    # Text characters one request may bring in (a chat's messages together; the bus carries it
    # in one message).
    max_body_chars: int = Field(default=200_000, ge=1)
    # Bytes of a request body, refused with 413 before it is read, parsed or authenticated.
    max_request_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    # Messages of one chat completion request.
    max_messages_per_request: int = Field(default=1000, ge=1, le=MESSAGES_CEILING)
    # Event streams (session events, streamed chat completions) open at once per bearer token,
    # and how long one may stay open before it ends (the client reconnects).
    max_streams_per_token: int = Field(default=64, ge=1)
    stream_max_lifetime_s: float = Field(default=3600.0, gt=0)
    tool_invoke_timeout_s: float = Field(default=330.0, gt=0)
    # Reply parts sent to channel platforms at once (per channel), and attempts per part.
    outbound_concurrency: int = Field(default=16, ge=1, le=1000)
    outbound_max_attempts: int = Field(default=8, ge=1, le=100)

    # Chat channels (README "Channels"): one account each from the environment, "default".
    # A channel is served when its credentials are set; each *_api_base is for self-hosted API
    # servers and tests.
    telegram_bot_token: SecretStr = SecretStr("")
    telegram_webhook_secret: SecretStr = SecretStr("")
    telegram_api_base: str = "https://api.telegram.org"
    telegram_mode: Literal["webhook", "polling"] = "webhook"
    # The public URL of POST /channels/telegram/default, registered with setWebhook at start.
    telegram_webhook_url: str = ""
    slack_bot_token: SecretStr = SecretStr("")
    slack_signing_secret: SecretStr = SecretStr("")
    slack_api_base: str = "https://slack.com/api/"
    discord_bot_token: SecretStr = SecretStr("")
    discord_public_key: str = ""
    discord_application_id: str = ""
    discord_api_base: str = "https://discord.com/api/v10"
    # Webhooks: POST /hooks/* with this bearer token (and per-mapping tokens).
    hooks_token: SecretStr = SecretStr("")

    @model_validator(mode="after")
    def _strong_token(self) -> Self:
        """A weak token (``change-me``, short...) is refused at start; an empty one is refused
        by ``serve`` (settings without a token are fine for what does not serve)."""
        value = self.gateway_token.get_secret_value()
        if value:
            tokens.require_strong("SB_GATEWAY_TOKEN", value)
        return self
