"""Gateway settings."""

from __future__ import annotations

from pydantic import Field, SecretStr

from switchboard.sessions import AgentId
from switchboard.settings import CommonSettings


class GatewaySettings(CommonSettings):
    http_host: str = "0.0.0.0"
    http_port: int = Field(default=8080, ge=0, le=65535)
    gateway_token: SecretStr = SecretStr("")
    agent_addr: str = "127.0.0.1:50051"
    default_agent: AgentId = "main"
    reply_timeout_s: float = Field(default=300.0, gt=0)
    max_body_chars: int = Field(default=200_000, ge=1)
    tool_invoke_timeout_s: float = Field(default=330.0, gt=0)
    # Reply parts sent to channel platforms at once (per channel), and attempts per part.
    outbound_concurrency: int = Field(default=16, ge=1, le=1000)
    outbound_max_attempts: int = Field(default=8, ge=1, le=100)
