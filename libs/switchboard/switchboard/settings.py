"""Settings: one validated object per service, read from ``SB_*`` environment variables.

Each service subclasses :class:`CommonSettings` in its own ``config.py``; nothing else in the
code base reads the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_home() -> Path:
    return Path.home() / ".switchboard"


class CommonSettings(BaseSettings):
    """What every service needs: the bus, identity, logging, telemetry and its ops port."""

    model_config = SettingsConfigDict(env_prefix="SB_", extra="ignore", frozen=True)

    home: Path = Field(default_factory=default_home)
    nats_url: str = "nats://127.0.0.1:4222"
    subject_prefix: str = "sb"
    instance: str = ""
    log_level: str = "INFO"
    log_json: bool = True
    ops_host: str = "0.0.0.0"
    ops_port: int = Field(default=0, ge=0, le=65535)
    otlp_endpoint: str = Field(
        default="",
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT", "SB_OTLP_ENDPOINT"),
    )

    @field_validator("subject_prefix")
    @classmethod
    def _prefix_is_a_token(cls, value: str) -> str:
        if not value or any(c in value for c in ".*> \t"):
            raise ValueError("SB_SUBJECT_PREFIX must be one NATS token, e.g. 'sb'")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError("SB_LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL")
        return level


class DatabaseSettings(BaseSettings):
    """Mixin for services that own a PostgreSQL schema."""

    model_config = SettingsConfigDict(env_prefix="SB_", extra="ignore", frozen=True)

    database_url: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    database_pool_max: int = Field(default=10, ge=1, le=200)
