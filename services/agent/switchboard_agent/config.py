"""Agent runtime settings."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field

from switchboard.settings import CommonSettings, DatabaseSettings


def _env(name: str) -> AliasChoices:
    """Provider variables keep their usual names (ANTHROPIC_API_KEY...) and accept SB_ ones."""
    return AliasChoices(name, f"SB_{name}")


class AgentSettings(CommonSettings, DatabaseSettings):
    agent_grpc_host: str = "0.0.0.0"
    agent_grpc_port: int = Field(default=50051, ge=0, le=65535)
    model: str = ""
    anthropic_api_key: str = Field(default="", validation_alias=_env("ANTHROPIC_API_KEY"))
    anthropic_base_url: str = Field(default="", validation_alias=_env("ANTHROPIC_BASE_URL"))
    openai_api_key: str = Field(default="", validation_alias=_env("OPENAI_API_KEY"))
    openai_base_url: str = Field(default="", validation_alias=_env("OPENAI_BASE_URL"))
    max_iterations: int = Field(default=8, ge=1, le=100)
    max_tokens: int = Field(default=4096, ge=1)
    agent_max_concurrent_runs: int = Field(default=16, ge=1, le=1000)
    tool_timeout_s: float = Field(default=60.0, gt=0)
    workspaces_dir: Path | None = None
    queue_mode: str = Field(default="queue", pattern=r"^(queue|followup|collect|steer|interrupt)$")
    collect_debounce_ms: int = Field(default=2000, ge=0, le=600_000)

    def workspace_root(self) -> Path:
        return self.workspaces_dir or self.home / "workspaces"
