"""The per-service NetworkPolicies of k8s/base/network-policies.yaml (the default deny and DNS
above them are hand-written), and the client lists of the dev dependencies' policies: each flow
comes from the registry (``calls``, ``needs``, public ports) or the overrides (``internet``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..registry import INFRASTRUCTURE, Service
from . import overrides
from .k8s import callers, comment, labels, summary

INFRA = {"nats": ("NATS", 4222), "postgres": ("PostgreSQL", 5432), "qdrant": ("Qdrant", 6333)}
PRIVATE_V4 = (
    *("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
    *("100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"),
)
PRIVATE_V6 = ("fc00::/7", "fe80::/10", "::1/128")


def namespace(name: str) -> list[str]:
    return [
        "    - from:",
        "        - namespaceSelector:",
        "            matchLabels:",
        f"              kubernetes.io/metadata.name: {name}",
    ]


def from_pods(names: Sequence[str], indent: str = "    ") -> list[str]:
    return [
        f"{indent}- from:",
        f"{indent}    - podSelector:",
        f"{indent}        matchExpressions:",
        f"{indent}          - key: app.kubernetes.io/name",
        f"{indent}            operator: In",
        f"{indent}            values: [{', '.join(names)}]",
    ]


def internet(reason: str) -> list[str]:
    lines = [*comment(f"The internet on 443 and 80: {reason}.", "    ")]
    lines += [
        "    # Never the cluster, the private networks or the cloud metadata address.",
        "    - to:",
        "        - ipBlock:",
        "            cidr: 0.0.0.0/0",
        "            except:",
        *(f"              - {cidr}" for cidr in PRIVATE_V4),
        "        - ipBlock:",
        "            cidr: ::/0",
        "            except:",
        *(f"              - {cidr}" for cidr in PRIVATE_V6),
        "      ports:",
        "        - port: 443",
        "        - port: 80",
    ]
    return lines


def policy(service: Service, services: Sequence[Service]) -> list[str]:
    """One service's NetworkPolicy: what may reach it and what it may reach."""
    name = service.name
    lines = [
        *comment(f"{name}: {summary(service)}."),
        "apiVersion: networking.k8s.io/v1",
        "kind: NetworkPolicy",
        "metadata:",
        f"  name: {name}",
        *labels(name, "  "),
        "spec:",
        "  podSelector:",
        "    matchLabels:",
        f"      app.kubernetes.io/name: {name}",
        '  policyTypes: ["Ingress", "Egress"]',
        "  ingress:",
    ]
    for port in service.ports:
        if port.public:
            lines += [
                "    # The Ingress controller (namespace ingress-nginx; an overlay patches another"
                " in).",
                *namespace("ingress-nginx"),
                "      ports:",
                f"        - port: {port.name}",
            ]
    who = callers(service, services)
    if who and service.port("grpc"):
        lines += [
            f"    # gRPC from the services that call it: {', '.join(who)}.",
            *from_pods(who),
            "      ports:",
            "        - port: grpc",
        ]
    lines += [
        "    # Prometheus (namespace monitoring) scrapes /metrics.",
        *namespace("monitoring"),
        "      ports:",
        "        - port: ops",
        "  egress:",
    ]
    by_name = {s.name: s for s in services}
    if service.calls:
        lines.append(f"    # gRPC to the services it calls: {', '.join(service.calls)}.")
    for callee in service.calls:
        grpc = by_name[callee].port("grpc")
        assert grpc is not None, f"{name} calls {callee}, which serves no gRPC"
        lines += [
            "    - to:",
            "        - podSelector:",
            "            matchLabels:",
            f"              app.kubernetes.io/name: {callee}",
            "      ports:",
            f"        - port: {grpc.number}",
        ]
    needs = [need for need in INFRASTRUCTURE if need in service.needs]
    if needs:
        servers = ", ".join(INFRA[need][0] for need in needs)
        lines += [
            f"    # {servers}: in the cluster (overlays/dev) or managed (overlays/prod),",
            "    # so any address, on their ports only.",
            "    - ports:",
            *(f"        - port: {INFRA[need][1]}" for need in needs),
        ]
    reason = overrides.of(name).internet
    if reason:
        lines += internet(reason)
    lines += [
        "    # Traces to the OpenTelemetry collector (namespace monitoring), when",
        "    # OTEL_EXPORTER_OTLP_ENDPOINT is set.",
        "    - to:",
        "        - namespaceSelector:",
        "            matchLabels:",
        "              kubernetes.io/metadata.name: monitoring",
        "      ports:",
        "        - port: 4317",
    ]
    return lines


def clients(server: str, services: Sequence[Service]) -> list[str]:
    """The ingress rule of a dev dependency: the services whose ``needs`` name it."""
    names = [s.name for s in services if server in s.needs]
    everyone = "all of them" if len(names) == len(services) else ", ".join(names)
    return [
        f"    # The services that need it (registry `needs`): {everyone}.",
        *from_pods(names),
    ]
