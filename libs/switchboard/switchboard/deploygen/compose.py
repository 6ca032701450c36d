"""The per-service blocks of docker-compose.yml: one service per registry entry, and the NATS
server's password variables (one per NATS user)."""

from __future__ import annotations

from collections.abc import Sequence

from .. import natsauth
from ..registry import Service
from . import configfile, overrides

ALL_INTERFACES = "0.0.0.0"
DATABASE_URL = (
    "postgresql://switchboard:${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}@postgres:5432/switchboard"
)
INFRA_URLS = {"qdrant": ("SB_QDRANT_URL", "http://qdrant:6333")}
HEALTH = (
    'test: ["CMD", "python", "-c", "import urllib.request; '
    "urllib.request.urlopen('http://127.0.0.1:{port}/healthz', timeout=3)\"]"
)


def required(variable: str) -> str:
    """``${VAR:?set VAR}``: compose refuses to start without it (no default credential)."""
    return f"${{{variable}:?set {variable}}}"


def port_env(service: Service) -> list[tuple[str, str]]:
    """The port settings: public ports and the ops port first (their hosts are set already: a
    public port's default binds everywhere, SB_OPS_HOST is common), then each other port with
    its host on every interface, so callers in other containers reach it."""
    ordered = [p for p in service.ports if p.public or p.name == "ops"]
    env = [(p.setting, f'"{p.number}"') for p in ordered]
    for port in service.ports:
        if port not in ordered:
            env += [(port.host_setting, ALL_INTERFACES), (port.setting, f'"{port.number}"')]
    return env


def callee_env(service: Service, services: Sequence[Service]) -> list[tuple[str, str]]:
    by_name = {s.name: s for s in services}
    env = []
    for name in service.calls:
        grpc = by_name[name].port("grpc")
        assert grpc is not None, f"{service.name} calls {name}, which serves no gRPC"
        env.append((by_name[name].addr_setting, f"{name}:{grpc.number}"))
    return env


def service_block(service: Service, services: Sequence[Service]) -> list[str]:
    """The lines of one Compose service, indented under ``services:``."""
    deploy = overrides.of(service.name)
    name = service.name
    lines = [f"  {name}:", *(f"    {c}" for c in deploy.compose_comment)]
    if service.scaled:
        lines += [
            "    deploy:",
            "      mode: replicated  # the default; podman-compose scales only with it said",
            f"      replicas: ${{SB_{name.upper()}_REPLICAS:-{deploy.compose_replicas}}}",
        ]
    lines += [
        "    <<: *switchboard-service",
        f"    image: switchboard/{name}:${{SB_IMAGE_TAG:-dev}}",
        "    build:",
        "      context: .",
        "      dockerfile: Dockerfile",
        "      args:",
        f"        SERVICE: {name}",
        "    environment:",
        "      <<: *common-env",
    ]
    env = [("OTEL_SERVICE_NAME", service.otel_name), *port_env(service)]
    env += [INFRA_URLS[need] for need in service.needs if need in INFRA_URLS]
    env += [*deploy.env, *callee_env(service, services)]
    if any(p.public for p in service.ports):
        env.append(("SB_GATEWAY_TOKEN", required("SB_GATEWAY_TOKEN")))
    if service.port("grpc") or service.calls:
        env.append(("SB_SERVICE_TOKEN", required("SB_SERVICE_TOKEN")))
    password = natsauth.password_variable(name)
    env.append(("SB_CONFIG_FILE", configfile.PATH))
    env += [("SB_NATS_USER", name), ("SB_NATS_PASSWORD", required(password))]
    lines += [f"      {key}: {value}" for key, value in env]
    if "postgres" in service.needs:
        lines += [
            "      # A password with URL-reserved characters must be percent-encoded here.",
            f"      SB_DATABASE_URL: {DATABASE_URL}",
        ]
    for group in deploy.passthrough:
        lines += [*(f"      {c}" for c in group.comment), *(f"      {n}:" for n in group.names)]
    public = [p for p in service.ports if p.public]
    if public:
        lines.append("    ports:")
        variable = f"SB_{name.upper()}_PORT"
        lines += [f'      - "${{{variable}:-{p.number}}}:{p.number}"' for p in public]
    lines += [
        "    volumes:",
        "      - type: bind  # the directory, not the file: docs/config-file.md",
        f"        source: {configfile.COMPOSE_DIR}",
        f"        target: {configfile.MOUNT_DIR}",
        "        read_only: true",
    ]
    for volume in deploy.volumes:
        comment = f"  # {volume.compose_comment}" if volume.compose_comment else ""
        lines.append(f"      - {volume.compose}:{volume.path}{comment}")
    lines += [
        "    healthcheck:",
        "      <<: *healthcheck",
        "      " + HEALTH.format(port=service.health_port.number),
        "    depends_on:",
    ]
    for dependency in (*service.needs, *service.calls):
        lines += [f"      {dependency}:", "        condition: service_healthy"]
    return lines


def nats_passwords() -> list[str]:
    """nats-server's environment in Compose: the password of every NATS user."""
    lines = []
    for user in natsauth.users():
        variable = natsauth.password_variable(user)
        hint = " (switchboard secrets > .env)" if user == natsauth.ADMIN else ""
        lines.append(f"      {variable}: ${{{variable}:?set {variable}{hint}}}")
    return lines


def volumes(services: Sequence[Service]) -> list[str]:
    """The named volumes the services mount (each once, in registry order)."""
    names = dict.fromkeys(v.compose for s in services for v in overrides.of(s.name).volumes)
    return [f"  {name}:" for name in names]
