"""Settings of the ``switchboard`` command, read like the services' (``SB_*`` variables)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from switchboard.loops import EventLoop
from switchboard.settings import Settings, default_home

# What `switchboard up` (embedded mode) gives the services unless the environment sets it: the
# lighter choice where a feature costs memory on a laptop or a small VPS (docs/footprint.md).
# Compose and Kubernetes keep the services' own defaults.
EMBEDDED_DEFAULTS: dict[str, str] = {
    # Keyword-only memory: no embedding model in the process (about 50 MiB and a few ms of CPU
    # per stored turn); `local` brings hybrid search back (docs/memory.md).
    "SB_EMBEDDING_PROVIDER": "none",
    # Four PostgreSQL connections a service, not ten: each backend keeps 3.5-5 MiB of its own
    # (caches, prepared plans), and after 100 sessions at once the services held 13 of them.
    # Bench, one process, after the load: PostgreSQL 68.7 -> 43.2 MiB at 3, turns/s unchanged.
    "SB_DATABASE_POOL_MAX": "4",
}

DEFAULT_HTTP_PORT = 8080


def check_port(name: str, port: int) -> int:
    if not 0 < port < 65536:
        raise ValueError(f"{name}={port} is not a TCP port (1-65535)")
    return port


class LauncherSettings(Settings):
    """What ``switchboard up`` takes from the environment (the command line overrides it)."""

    home: Path = Field(default_factory=default_home)  # SB_HOME
    http_port: int = DEFAULT_HTTP_PORT  # SB_HTTP_PORT
    nats_port: int | None = None  # SB_NATS_PORT: default, a free port
    # SB_NATS_CLUSTER: NATS nodes (as `up --nats-cluster N`); 1, the default, is one server.
    nats_cluster: int = Field(default=1, ge=1, le=5)
    database_url: SecretStr | None = None  # SB_DATABASE_URL: use it instead of pgserver
    gateway_token: SecretStr | None = None  # SB_GATEWAY_TOKEN: else the stored/new one
    service_token: SecretStr | None = None  # SB_SERVICE_TOKEN: else the stored/new one
    processes: bool = False  # SB_PROCESSES: one process per service (as `up --processes`)
    event_loop: EventLoop = EventLoop.AUTO  # SB_EVENT_LOOP (switchboard.loops)
    # SB_GATEWAY_URL: the running gateway the admin commands talk to (default: loopback on
    # SB_HTTP_PORT)
    gateway_url: str = ""

    @field_validator("http_port")
    @classmethod
    def _http_port(cls, value: int) -> int:
        return check_port("SB_HTTP_PORT", value)

    @field_validator("nats_port")
    @classmethod
    def _nats_port(cls, value: int | None) -> int | None:
        return None if value is None else check_port("SB_NATS_PORT", value)
