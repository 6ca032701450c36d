"""The services of Switchboard, in one table: the single source of truth for the embedded
launcher, the gateway's readiness, the test support, the Makefile's package list and the
deployment check (Compose, the Kubernetes base and the Dockerfile must agree with it).

A new service is a folder ``services/<name>/`` (package ``switchboard_<name>``) plus one entry
here. This module uses the standard library only, so that ``make`` can run it before anything
is installed: ``python3 libs/switchboard/switchboard/registry.py packages``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

INFRASTRUCTURE = ("nats", "postgres", "qdrant")  # what services may need besides each other


@dataclass(frozen=True)
class Port:
    """A TCP port a service listens on: its name in the manifests, the number it has in a
    container (Compose, Kubernetes) and the setting that moves it (embedded mode gives every
    process a free one, except ``public`` ports, which the user chooses)."""

    name: str  # "ops" | "grpc" | "http"
    number: int
    setting: str
    public: bool = False

    @property
    def host_setting(self) -> str:
        """The setting of the address it binds to (``SB_OPS_HOST`` for ``SB_OPS_PORT``)."""
        return self.setting.removesuffix("_PORT") + "_HOST"


@dataclass(frozen=True)
class Service:
    name: str
    summary: str
    ports: tuple[Port, ...]
    needs: tuple[str, ...] = ("nats",)  # infrastructure (INFRASTRUCTURE)
    calls: tuple[str, ...] = ()  # services whose gRPC API it calls (wired by address)
    scaled: bool = True  # runs several replicas (Compose deploy.replicas, `up --scale`)

    @property
    def module(self) -> str:
        """The import name; ``python -m <module>`` runs the service."""
        return f"switchboard_{self.name}"

    @property
    def package_dir(self) -> str:
        return f"services/{self.name}"

    @property
    def server(self) -> str:
        """``module:function`` of the coroutine that runs the service: ``serve(settings, stop)``."""
        return f"{self.module}.server:serve"

    @property
    def settings_class(self) -> str:
        return f"{self.module}.config:{self.name.capitalize()}Settings"

    @property
    def otel_name(self) -> str:
        """``service.name`` of its traces: the one naming rule (OTEL_SERVICE_NAME overrides it
        for a process that runs one service)."""
        return f"switchboard-{self.name}"

    def port(self, name: str) -> Port | None:
        return next((p for p in self.ports if p.name == name), None)

    @property
    def health_port(self) -> Port:
        """The port serving ``/healthz`` and ``/readyz``: the HTTP API, else the ops server."""
        port = self.port("http") or self.port("ops")
        assert port is not None, f"{self.name} serves no health port"
        return port

    @property
    def addr_setting(self) -> str:
        """The setting that tells callers where its gRPC servers are (comma-separated)."""
        return f"SB_{self.name.upper()}_ADDR"


def _ops(number: int) -> Port:
    return Port("ops", number, "SB_OPS_PORT")


SERVICES: tuple[Service, ...] = (
    Service(
        "gateway",
        "the HTTP edge: OpenAI-compatible API, sessions, tools and approvals APIs, channels",
        # /metrics on the ops port, away from the public one.
        (Port("http", 8080, "SB_HTTP_PORT", public=True), _ops(9100)),
        calls=("agent", "router", "memory", "scheduler", "media"),
        scaled=False,
    ),
    Service(
        "router",
        "the inbound pipeline: security, routing to a session, the lane append; gRPC RouterAdmin",
        (Port("grpc", 50052, "SB_ROUTER_GRPC_PORT"), _ops(9101)),
    ),
    Service(
        "agent",
        "the agent runtime: lanes, runs, the LLM tool loop; gRPC Sessions, Approvals, ToolAccess",
        (Port("grpc", 50051, "SB_AGENT_GRPC_PORT"), _ops(9102)),
        needs=("nats", "postgres"),
        calls=("memory", "scheduler", "media"),
    ),
    Service(
        "memory",
        "the memory service: embeddings, hybrid search over what an agent remembers; gRPC Memory",
        (Port("grpc", 50053, "SB_MEMORY_GRPC_PORT"), _ops(9104)),
        # Qdrant: a server in Compose and Kubernetes; embedded mode keeps it in-process.
        needs=("nats", "postgres", "qdrant"),
        # Qdrant's local mode (embedded) lets one process open its directory; with a Qdrant
        # server (Compose, Kubernetes) replicas are fine.
        scaled=False,
    ),
    Service(
        "tools",
        "the tool executor: pulls tool calls and runs them in the sandbox",
        (_ops(9103),),
    ),
    Service(
        "scheduler",
        "the scheduler: cron, interval and one-shot jobs, heartbeats, watchers; gRPC Scheduler",
        (Port("grpc", 50054, "SB_SCHEDULER_GRPC_PORT"), _ops(9105)),
        needs=("nats", "postgres"),
        # Replicas share the jobs: each due job is claimed by one (FOR UPDATE SKIP LOCKED).
    ),
    Service(
        "media",
        "the media service: attachments sniffed, checked and stored with a TTL, images "
        "resized, audio transcribed; gRPC Media",
        (Port("grpc", 50055, "SB_MEDIA_GRPC_PORT"), _ops(9106)),
        needs=("nats", "postgres"),
        # Its files are a directory (a volume): more replicas need one shared volume
        # (ReadWriteMany); the store and its cleanup are safe for that.
        scaled=False,
    ),
)


def names() -> list[str]:
    return [s.name for s in SERVICES]


def get(name: str) -> Service:
    for service in SERVICES:
        if service.name == name:
            return service
    raise KeyError(f"unknown service {name!r}; known: {', '.join(names())}")


def _main(argv: list[str]) -> int:
    """``packages``: the editable installs of ``make install``; ``names``, ``modules``."""
    what = argv[1] if len(argv) > 1 else ""
    if what == "packages":
        print(" ".join(["-e libs/switchboard", *(f"-e {s.package_dir}" for s in SERVICES)]))
    elif what == "names":
        print(" ".join(names()))
    elif what == "modules":
        print(" ".join(s.module for s in SERVICES))
    else:
        print(f"usage: {argv[0]} packages|names|modules", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
