"""Settings: one validated object per service (and one for the CLI), read from ``SB_*``
environment variables.

Each service subclasses :class:`CommonSettings` in its own ``config.py``; nothing else in the
code base reads the environment. ``Settings.from_environ(env)`` reads a given mapping instead of
``os.environ``: that is how one process hosts several services, each with its own settings.
Secrets (model keys, tokens, database URLs) are ``SecretStr``: they print as ``**********``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Self

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.sources.utils import parse_env_vars

from .loops import EventLoop

_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("sb_settings_environ", default=None)


# Names that look like credentials: never printed, and a service only sees the ones its
# settings declare.
_SECRET_LOOKING = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|DATABASE_URL", re.IGNORECASE)


def describe(error: ValidationError) -> str:
    """A validation error in one line: ``field: problem (given: value); ...`` (the value only
    for fields whose names do not look like credentials)."""
    parts = []
    for e in error.errors():
        where = ".".join(str(x) for x in e.get("loc", ())) or "settings"
        problem = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        given = e.get("input")
        shown = isinstance(given, str) and not _SECRET_LOOKING.search(where)
        parts.append(f"{where}: {problem}" + (f" (given: {given!r})" if shown else ""))
    return "; ".join(parts)


def environment_names(settings_class: type[BaseSettings]) -> set[str]:
    """The environment variables ``settings_class`` reads by name (upper case); those whose
    names vary (``SB_<CHANNEL>_DM_POLICY``...) match its ``environment_patterns``."""
    prefix = str(settings_class.model_config.get("env_prefix", ""))
    names: set[str] = set()
    for name, info in settings_class.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {c for c in alias.choices if isinstance(c, str)}
        elif isinstance(alias, str):
            names.add(alias)
        else:
            names.add(prefix + name)
    return {n.upper() for n in names}


def scoped_environ(
    settings_class: type[BaseSettings], environ: Mapping[str, str]
) -> dict[str, str]:
    """``environ`` without the ``SB_*`` and credential-looking variables that
    ``settings_class`` does not read: each service gets only the secrets it needs (the tool
    executor never sees a model key or the gateway token)."""
    wanted = environment_names(settings_class)
    patterns = [re.compile(p) for p in getattr(settings_class, "environment_patterns", ())]
    return {
        k: v
        for k, v in environ.items()
        if k.upper() in wanted
        or any(p.fullmatch(k.upper()) for p in patterns)
        or not (k.upper().startswith("SB_") or _SECRET_LOOKING.search(k))
    }


def default_home() -> Path:
    return Path.home() / ".switchboard"


def env_alias(name: str) -> AliasChoices:
    """Variables with a usual name outside Switchboard (ANTHROPIC_API_KEY, OTEL_...) keep it,
    and accept an ``SB_`` one too."""
    return AliasChoices(name, f"SB_{name}")


class _MappingEnvSource(EnvSettingsSource):
    """The environment source, reading a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ  # read by _load_env_vars, which the base __init__ calls
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


class Settings(BaseSettings):
    """Base of every settings class: ``SB_`` prefix, immutable, unknown variables ignored."""

    model_config = SettingsConfigDict(
        env_prefix="SB_", extra="ignore", frozen=True, populate_by_name=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        environ = _ENVIRON.get()
        if environ is not None:
            env_settings = _MappingEnvSource(settings_cls, environ)
        return init_settings, env_settings, dotenv_settings, file_secret_settings

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], **overrides: Any) -> Self:
        """Settings read from ``environ`` (instead of ``os.environ``); ``overrides`` win."""
        with _reading(environ):
            return cls(**overrides)


@contextmanager
def _reading(environ: Mapping[str, str]) -> Iterator[None]:
    token = _ENVIRON.set(environ)
    try:
        yield
    finally:
        _ENVIRON.reset(token)


class CommonSettings(Settings):
    """What every service needs: the bus, identity, logging, telemetry and its ops port."""

    # The data directory (embedded mode keeps nats/, pg/, logs/, secrets/, workspaces/ there).
    home: Path = Field(default_factory=default_home)
    # One URL, or every node of a cluster comma-separated (bus.servers).
    nats_url: str = "nats://127.0.0.1:4222"
    # The service's own NATS user (switchboard.natsauth); empty: anonymous, for a server
    # without authorization (tests of the library only).
    nats_user: str = ""
    # The password of SB_NATS_USER.
    nats_password: SecretStr = SecretStr("")
    # Replicas of every stream and KV bucket the stream owner creates (bus.ensure_streams): 1
    # on one server; 3 on a cluster of three or more nodes (switchboard up --nats-cluster sets it).
    nats_replicas: int = Field(default=1, ge=1, le=5)
    # TLS to NATS: a CA bundle to verify the server with (a tls:// URL alone uses the system's).
    nats_tls_ca: Path | None = None
    # The first token of every NATS subject (one token, e.g. 'sb').
    subject_prefix: str = "sb"
    # This replica's name (its NATS connection, traces' service.instance.id); empty: the service's
    # name.
    instance: str = ""
    # DEBUG, INFO, WARNING, ERROR or CRITICAL.
    log_level: str = "INFO"
    # Log one JSON object per line (false: plain text, for a terminal).
    log_json: bool = True
    # Health and metrics; loopback unless a deployment opens it (Compose and Kubernetes do).
    ops_host: str = "127.0.0.1"
    # Port of the health (/healthz, /readyz) and /metrics server.
    ops_port: int = Field(default=0, ge=0, le=65535)
    # Export traces over OTLP/gRPC to this endpoint; empty: no export.
    otlp_endpoint: str = Field(
        default="",
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT", "SB_OTLP_ENDPOINT"),
    )
    # service.name of the traces; empty: the registry's rule, switchboard-<service>.
    otel_service_name: str = Field(default="", validation_alias=env_alias("OTEL_SERVICE_NAME"))
    # The event loop (switchboard.loops): auto = uvloop when installed.
    event_loop: EventLoop = EventLoop.AUTO
    # The configuration file this process watches, applying what changes in it without a restart
    # (docs/config-file.md); the switchboard command sets it to the file it read, a Kubernetes
    # deployment to its ConfigMap's mount.
    config_file: Path | None = None
    # JSON list of the variables whose values came from SB_CONFIG_FILE (the switchboard command
    # sets it): the others came from the environment, which wins over the file.
    config_from_file: list[str] = Field(default_factory=list)

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

    def address(self, service: str) -> str:
        """Where ``service``'s gRPC servers are (``SB_<SERVICE>_ADDR``, comma-separated); the
        settings class of a caller declares the field (``agent_addr``...)."""
        field = f"{service}_addr"
        if field not in type(self).model_fields:
            raise AttributeError(f"{type(self).__name__} has no {field} setting")
        return str(getattr(self, field))


class RpcSettings(Settings):
    """Mixin for services that serve or call internal gRPC."""

    # Their credential: servers require it of every call but health, clients send it (embedded
    # mode generates one under $SB_HOME/secrets; Compose and Kubernetes take it from a secret).
    service_token: SecretStr = SecretStr("")


class DatabaseSettings(Settings):
    """Mixin for services that own a PostgreSQL schema."""

    # The PostgreSQL the service keeps its schema in (postgresql://user:password@host:port/db).
    database_url: SecretStr = SecretStr("postgresql://postgres@127.0.0.1:5432/postgres")
    # Connections of the service's PostgreSQL pool at most.
    database_pool_max: int = Field(default=10, ge=1, le=200)


class ModelSettings(Settings):
    """The model provider: keys keep their usual names (and accept ``SB_`` ones)."""

    # The model, as provider:model (e.g. openai:gpt-4o-mini) or a tier (tier:fast); empty: chosen
    # from the keys set.
    model: str = ""
    # Use Anthropic's models with this key.
    anthropic_api_key: SecretStr = Field(
        default=SecretStr(""), validation_alias=env_alias("ANTHROPIC_API_KEY")
    )
    # Another Anthropic-compatible endpoint; empty: Anthropic's.
    anthropic_base_url: str = Field(default="", validation_alias=env_alias("ANTHROPIC_BASE_URL"))
    # Use OpenAI's (or an OpenAI-compatible server's) models with this key.
    openai_api_key: SecretStr = Field(
        default=SecretStr(""), validation_alias=env_alias("OPENAI_API_KEY")
    )
    # An OpenAI-compatible server (Ollama, vLLM...); empty: OpenAI's.
    openai_base_url: str = Field(default="", validation_alias=env_alias("OPENAI_BASE_URL"))

    def configured_by(self) -> list[str]:
        """The variables that configure a model (empty: none is configured)."""
        given = {
            "ANTHROPIC_API_KEY": self.anthropic_api_key.get_secret_value(),
            "OPENAI_API_KEY": self.openai_api_key.get_secret_value(),
            "SB_MODEL": self.model,
        }
        return [name for name, value in given.items() if value]
