"""Gateway settings."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from switchboard import tokens
from switchboard.plugins import PluginSettings
from switchboard.sessions import AgentId
from switchboard.settings import CommonSettings, RpcSettings

from .accounts_config import (
    DiscordAccount,
    SlackAccount,
    TelegramAccount,
    WhatsAppAccount,
    check_names,
)
from .hooks_config import Deliver, check_hooks_token, check_target_names, parse_mappings

# The most messages a chat request may ever hold: checked while the body is validated, so a
# request of many tiny messages is refused without building each (the setting is lower).
MESSAGES_CEILING = 10_000


class GatewaySettings(CommonSettings, RpcSettings, PluginSettings):
    # A refused value (a weak token...) is never echoed in the error's text.
    model_config = SettingsConfigDict(hide_input_in_errors=True)

    # Where the HTTP API listens (embedded mode: 127.0.0.1).
    http_host: str = "0.0.0.0"
    # The HTTP API's port (OpenAI-compatible API, WebChat, channels' webhooks).
    http_port: int = Field(default=8080, ge=0, le=65535)
    # The bearer token of every endpoint but /, /healthz and /readyz; a weak or well-known one
    # (change-me, short...) is refused at start.
    gateway_token: SecretStr = SecretStr("")
    # The agent's gRPC address(es), comma-separated.
    agent_addr: str = "127.0.0.1:50051"
    # The router's gRPC address(es), comma-separated (pairing commands).
    router_addr: str = "127.0.0.1:50052"
    memory_addr: str = "127.0.0.1:50053"
    scheduler_addr: str = "127.0.0.1:50054"
    media_addr: str = "127.0.0.1:50055"
    # The agent a request that names none goes to.
    default_agent: AgentId = "main"
    # How long a chat request waits for the agent's reply.
    reply_timeout_s: float = Field(default=300.0, gt=0)
    # Seconds a message is offered to NATS again (same id: stored once) while a stream has no
    # leader, e.g. a node of a NATS cluster died; then 503 bus_unavailable.
    publish_retry_s: float = Field(default=10.0, ge=0, le=120)
    # Text characters one request may bring in (a chat's messages together; the bus carries it
    # in one message).
    max_body_chars: int = Field(default=200_000, ge=1)
    # Bytes of a request body, refused with 413 before it is read, parsed or authenticated.
    max_request_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    # Messages of one chat completion request.
    max_messages_per_request: int = Field(default=1000, ge=1, le=MESSAGES_CEILING)
    # Event streams (session events, streamed chat completions) open at once per bearer token.
    max_streams_per_token: int = Field(default=64, ge=1)
    # How long one event stream may stay open before it ends (the client reconnects).
    stream_max_lifetime_s: float = Field(default=3600.0, gt=0)
    # How long POST /tools/invoke waits for the agent to run the tool.
    tool_invoke_timeout_s: float = Field(default=330.0, gt=0)
    # Reply parts sent to channel platforms at once (per channel), and attempts per part.
    outbound_concurrency: int = Field(default=16, ge=1, le=1000)
    # Attempts to deliver one reply part before it is dead-lettered.
    outbound_max_attempts: int = Field(default=8, ge=1, le=100)

    # Chat channels (README "Channels"): one account each from the environment, "default".
    # A channel is served when its credentials are set; each *_api_base is for self-hosted API
    # servers and tests.
    telegram_bot_token: SecretStr = SecretStr("")
    # Telegram's secret_token, checked on every webhook call.
    telegram_webhook_secret: SecretStr = SecretStr("")
    # Telegram's Bot API base URL (a self-hosted Bot API server, tests).
    telegram_api_base: str = "https://api.telegram.org"
    # webhook (Telegram calls the gateway) or polling (the gateway calls getUpdates).
    telegram_mode: Literal["webhook", "polling"] = "webhook"
    # The public URL of POST /channels/telegram/default, registered with setWebhook at start.
    telegram_webhook_url: str = ""
    # Polling mode (docs/channels/telegram-polling.md): getUpdates' long poll in seconds, and
    # how much longer a poll may stay unanswered before the watchdog restarts it.
    telegram_poll_timeout_s: int = Field(default=30, ge=1, le=50)
    # How much longer than its long poll a getUpdates call may stay unanswered before the watchdog
    # restarts it.
    telegram_poll_watchdog_margin_s: float = Field(default=15.0, gt=0, le=300)
    # SB_TELEGRAM_ACCOUNTS: more bots, JSON {"<name>": {"bot_token", "webhook_secret"?, "mode"?,
    # "webhook_url"?, "api_base"?}}, each served as the account <name> (its webhook at
    # /channels/telegram/<name>); SB_TELEGRAM_BOT_TOKEN and its neighbours are the account
    # "default" (docs/channels/telegram.md).
    telegram_accounts: dict[str, TelegramAccount] = Field(default_factory=dict)
    # Slack's bot token (xoxb-...): serves Slack when set.
    slack_bot_token: SecretStr = SecretStr("")
    # Slack's signing secret: events without a valid signature are refused.
    slack_signing_secret: SecretStr = SecretStr("")
    # Slack's Web API base URL.
    slack_api_base: str = "https://slack.com/api/"
    # SB_SLACK_ACCOUNTS: more workspaces, JSON {"<name>": {"bot_token", "signing_secret",
    # "api_base"?}}, each served as the account <name> (its events at /channels/slack/<name>);
    # SB_SLACK_BOT_TOKEN and SB_SLACK_SIGNING_SECRET are the account "default"
    # (docs/channels/slack.md).
    slack_accounts: dict[str, SlackAccount] = Field(default_factory=dict)
    # Where the gateway downloads Slack files with the bot token (channels/slack_files.py):
    # origins of url_private, and networks the SSRF guard lets it reach (none: public only).
    slack_file_origins: list[str] = Field(default_factory=lambda: ["https://files.slack.com"])
    # JSON list of networks Slack file downloads may reach although the SSRF guard refuses them.
    slack_file_allow_cidrs: list[str] = Field(default_factory=list)
    # Discord's bot token: serves Discord when set.
    discord_bot_token: SecretStr = SecretStr("")
    # The Discord application's public key: interactions without a valid signature are refused.
    discord_public_key: str = ""
    # The Discord application's id.
    discord_application_id: str = ""
    # Discord's API base URL.
    discord_api_base: str = "https://discord.com/api/v10"
    # SB_DISCORD_ACCOUNTS: more applications, JSON {"<name>": {"bot_token", "public_key",
    # "application_id"?, "gateway"?, "api_base"?}}, each served as the account <name> (its
    # interactions at /channels/discord/<name>); SB_DISCORD_BOT_TOKEN and its neighbours are the
    # account "default" (docs/channels/discord.md).
    discord_accounts: dict[str, DiscordAccount] = Field(default_factory=dict)
    # Hold Discord's gateway connection (WebSocket) for DMs and mentions, on one replica under
    # a lease (docs/channels/discord.md); off: slash commands only.
    discord_gateway: bool = False
    # WhatsApp Cloud API (docs/channels/whatsapp.md): the system user's access token; serves
    # WhatsApp when set (with the app secret, verify token and phone number id).
    whatsapp_access_token: SecretStr = SecretStr("")
    # The Meta app's secret: webhook events without a valid X-Hub-Signature-256 are refused.
    whatsapp_app_secret: SecretStr = SecretStr("")
    # The verify token typed in Meta's webhook setup (hub.verify_token of the GET check).
    whatsapp_verify_token: SecretStr = SecretStr("")
    # The business phone number's id (messages are sent from it).
    whatsapp_phone_number_id: str = ""
    # The Graph API base URL (version included).
    whatsapp_api_base: str = "https://graph.facebook.com/v21.0"
    # SB_WHATSAPP_ACCOUNTS: more numbers, JSON {"<name>": {"access_token", "app_secret",
    # "verify_token", "phone_number_id", "api_base"?}}, each served as the account <name> (its
    # webhook at /channels/whatsapp/<name>); SB_WHATSAPP_ACCESS_TOKEN and its neighbours are the
    # account "default" (docs/channels/whatsapp.md).
    whatsapp_accounts: dict[str, WhatsAppAccount] = Field(default_factory=dict)
    # --- webchat (webchat/, docs/webchat-protocol.md) ---
    # Bytes of one WebSocket frame from a client: a larger one is answered with an error.
    webchat_max_frame_bytes: int = Field(default=1024 * 1024, ge=1024, le=16 * 1024 * 1024)
    # Recent events kept per session for clients that reconnect (resume with last_seq), and how
    # long a session's events are still kept after its last socket closed.
    webchat_replay_events: int = Field(default=1000, ge=10, le=100_000)
    # How long a session's events are still kept after its last socket closed.
    webchat_replay_grace_s: float = Field(default=300.0, ge=0, le=86_400)
    # Seconds a new socket has to send its connect request before it is closed.
    webchat_connect_timeout_s: float = Field(default=10.0, gt=0, le=300)
    # --- end webchat ---
    # Webhooks: POST /hooks/* with this bearer token (and per-mapping tokens).
    hooks_token: SecretStr = SecretStr("")
    # --- hooks (hooks_config.py, docs/channels/webhooks.md) ---
    # SB_HOOKS_MAPPINGS: JSON {"<name>": {"action", "message", "token"?, ...}}, each served at
    # POST /hooks/<name>; checked at start. Secret: it holds the mappings' tokens.
    hooks_mappings: SecretStr = SecretStr("")
    # SB_HOOKS_TARGETS: JSON {"<name>": {"channel", "to", "account"?, "thread"?, "chat_type"?}},
    # the only chats /hooks/agent may deliver to (docs/trust.md); channels checked at start.
    hooks_targets: dict[str, Deliver] = Field(default_factory=dict)
    # Characters of a hook's message: longer is refused (wake, agent) or cut (a mapping's).
    hooks_max_message_chars: int = Field(default=20_000, ge=100, le=1_000_000)
    # --- a2a (a2a_server.py, README "A2A") ---
    # The gateway's public base URL, advertised in the A2A agent card as <url>/a2a (empty:
    # http://127.0.0.1:<SB_HTTP_PORT>, which only a client on the same host can use).
    a2a_public_url: str = ""
    # Tasks the A2A server remembers (in memory, per replica); the oldest are forgotten.
    a2a_max_tasks: int = Field(default=10_000, ge=10, le=1_000_000)
    # --- end a2a ---

    @model_validator(mode="after")
    def _hooks(self) -> Self:
        """A weak SB_HOOKS_TOKEN, an unusable SB_HOOKS_MAPPINGS or a target name of
        SB_HOOKS_TARGETS a caller could not write is refused at start."""
        gateway = self.gateway_token.get_secret_value()
        check_hooks_token(self.hooks_token.get_secret_value(), gateway)
        parse_mappings(
            self.hooks_mappings.get_secret_value(),
            hooks_token=self.hooks_token.get_secret_value(),
            gateway_token=gateway,
        )
        check_target_names(self.hooks_targets)
        return self

    # --- end hooks ---

    @model_validator(mode="after")
    def _accounts(self) -> Self:
        """A named account a URL cannot carry, or one named ``default`` next to the
        single-account settings, is refused at start."""
        check_names(
            "SB_TELEGRAM_ACCOUNTS",
            self.telegram_accounts,
            "SB_TELEGRAM_BOT_TOKEN",
            bool(self.telegram_bot_token.get_secret_value()),
        )
        check_names(
            "SB_SLACK_ACCOUNTS",
            self.slack_accounts,
            "SB_SLACK_BOT_TOKEN",
            bool(self.slack_bot_token.get_secret_value()),
        )
        check_names(
            "SB_DISCORD_ACCOUNTS",
            self.discord_accounts,
            "SB_DISCORD_BOT_TOKEN",
            bool(self.discord_bot_token.get_secret_value()),
        )
        check_names(
            "SB_WHATSAPP_ACCOUNTS",
            self.whatsapp_accounts,
            "SB_WHATSAPP_ACCESS_TOKEN",
            bool(self.whatsapp_access_token.get_secret_value()),
        )
        return self

    @model_validator(mode="after")
    def _strong_token(self) -> Self:
        """A weak token (``change-me``, short...) is refused at start; an empty one is refused
        by ``serve`` (settings without a token are fine for what does not serve)."""
        value = self.gateway_token.get_secret_value()
        if value:
            tokens.require_strong("SB_GATEWAY_TOKEN", value)
        return self
