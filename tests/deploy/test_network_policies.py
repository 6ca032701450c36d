"""The NetworkPolicies of each overlay allow exactly the flows the design needs (issue 15).

Between the pods of a build the flows come from the registry: every gRPC call edge (`calls`,
on the callee's gRPC port) and every service's infrastructure (`needs`, on the server's client
port, where the overlay runs the server in the cluster); every other pair of pods and port is
refused. Beyond the namespace's pods the rules are pinned one by one below (DNS, the Ingress
controller, Prometheus, the trace collector, the internet for the services that call outside
APIs, the managed servers' ports). The policies are evaluated offline by netpol.py.
"""

from __future__ import annotations

import pytest

from switchboard import registry

from . import netpol
from .manifests import SERVICES, Doc

# Each infrastructure server's client port (the one its clients use), by Service port name.
INFRA_CLIENT_PORT = {"nats": 4222, "postgres": 5432, "qdrant": 6333}
# The services that call APIs outside the cluster, on 443 and 80, and why.
INTERNET_USERS = {
    "gateway": "the chat platforms' APIs and webhook deliveries",
    "agent": "the model providers' APIs",
    "memory": "an OpenAI-compatible embeddings API",
    "tools": "web_fetch and the commands exec runs",
    "scheduler": "webhook and watch_url jobs",
    "media": "attachments fetched by URL and the transcription API",
}
INGRESS_CONTROLLER = "namespace ingress-nginx"
MONITORING = "namespace monitoring"  # Prometheus and the OpenTelemetry collector
DNS = "namespace kube-system k8s-app=kube-dns"
OTLP_GRPC = 4317
NATS_MONITOR = 8222


def expected_flows(pod_names: set[str]) -> set[tuple[str, str, int]]:
    """(source, destination, port) the registry says must be open between these pods."""
    flows = set()
    for service in SERVICES:
        for callee in map(registry.get, service.calls):
            grpc = callee.port("grpc")
            assert grpc, f"{service.name} calls {callee.name}, which serves no gRPC"
            flows.add((service.name, callee.name, grpc.number))
        for server in service.needs:
            if server in pod_names:
                flows.add((service.name, server, INFRA_CLIENT_PORT[server]))
    return flows


def cluster_routes(built: list[Doc]) -> set[tuple[str, str, int]]:
    """A clustered NATS (components/nats-cluster: a port named ``cluster``) reaches its own
    nodes on that port; nothing else does."""
    nats = [pod for pod in netpol.pods(built) if pod.name == "nats"]
    if not nats or "cluster" not in nats[0].ports:
        return set()
    return {("nats", "nats", nats[0].ports["cluster"][0])}


def expected_outside_rules(pod_names: set[str]) -> set[tuple[str, str, str, int | str, str]]:
    """(direction, pod, peer, port, protocol) of every rule reaching beyond the namespace."""
    rules: set[tuple[str, str, str, int | str, str]] = set()
    for pod in pod_names:
        rules |= {("egress", pod, DNS, 53, "UDP"), ("egress", pod, DNS, 53, "TCP")}
    for service in SERVICES:
        name = service.name
        ops = service.port("ops")
        assert ops, f"{name}: no ops port for /metrics"
        rules.add(("ingress", name, MONITORING, ops.number, "TCP"))
        rules.add(("egress", name, MONITORING, OTLP_GRPC, "TCP"))
        http = service.port("http")
        if http and http.public:
            rules.add(("ingress", name, INGRESS_CONTROLLER, http.number, "TCP"))
        for server in service.needs:  # in the cluster or managed: any address, that port only
            rules.add(("egress", name, netpol.ANYWHERE, INFRA_CLIENT_PORT[server], "TCP"))
        if name in INTERNET_USERS:
            rules |= {("egress", name, netpol.INTERNET, port, "TCP") for port in (443, 80)}
    if "nats" in pod_names:
        rules.add(("ingress", "nats", MONITORING, NATS_MONITOR, "TCP"))
    return rules


def pod_names(built: list[Doc]) -> set[str]:
    return {pod.name for pod in netpol.pods(built)}


def test_every_pod_is_isolated_both_ways(overlay: tuple[str, list[Doc]]) -> None:
    """A default deny covers every pod of the namespace: what the policies do not allow is
    refused, including pods added later."""
    name, built = overlay
    policies = netpol.policies(built)
    for pod in netpol.pods(built):
        for direction in ("Ingress", "Egress"):
            isolating = [
                p["metadata"]["name"]
                for p in policies
                if netpol.applies_to(p, pod) and direction in netpol.policy_types(p)
            ]
            assert isolating, f"{name}: {pod.name} is open to any {direction.lower()}"
    deny = [
        p
        for p in policies
        if p["spec"]["podSelector"] == {}
        and netpol.policy_types(p) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    assert deny, f"{name}: no default-deny policy selecting every pod"


@pytest.mark.parametrize("side", ["Ingress", "Egress", None], ids=["ingress", "egress", "both"])
def test_pods_reach_each_other_exactly_as_the_registry_says(
    overlay: tuple[str, list[Doc]], side: str | None
) -> None:
    """What both sides allow together, and each side on its own (the receiver's ingress rules
    alone, the sender's egress rules alone: neither leans on the other to stay closed)."""
    name, built = overlay
    pods = pod_names(built)
    assert {s.name for s in SERVICES} <= pods, f"{name}: services without a workload"
    allowed = netpol.flows(built, side)
    expected = expected_flows(pods) | cluster_routes(built)
    where = f"{name} ({side or 'both sides'})"
    missing = sorted(expected - allowed)
    extra = sorted(allowed - expected)
    assert not missing, f"{where}: flows the registry needs are refused: {missing}"
    assert not extra, f"{where}: flows no registry entry needs are allowed: {extra}"


def test_every_grpc_call_of_the_registry_is_allowed_in_both_overlays(
    overlay: tuple[str, list[Doc]],
) -> None:
    """The call edges alone, named: a policy change that cuts one shows the edge."""
    name, built = overlay
    allowed = netpol.flows(built)
    for service in SERVICES:
        for callee in map(registry.get, service.calls):
            grpc = callee.port("grpc")
            assert grpc and (service.name, callee.name, grpc.number) in allowed, (
                f"{name}: {service.name} cannot call {callee.name} on {grpc}"
            )


def test_only_the_documented_flows_leave_or_enter_the_namespace(
    overlay: tuple[str, list[Doc]],
) -> None:
    name, built = overlay
    found = netpol.outside_rules(built)
    expected = expected_outside_rules(pod_names(built))
    assert not sorted(expected - found), f"{name}: missing rules: {sorted(expected - found)}"
    assert not sorted(found - expected), f"{name}: undocumented rules: {sorted(found - expected)}"


def test_address_blocks_stay_off_the_cluster_and_the_metadata_service(
    overlay: tuple[str, list[Doc]],
) -> None:
    """Every ipBlock is the whole internet minus the private, shared, link-local (cloud
    metadata at 169.254.169.254) and loopback ranges: pods and Services are never reached
    through one, so the pod flows above are the only way in the cluster."""
    name, built = overlay
    for policy in netpol.policies(built):
        for rule in [*policy["spec"].get("ingress", []), *policy["spec"].get("egress", [])]:
            for peer in [*rule.get("from", []), *rule.get("to", [])]:
                if "ipBlock" in peer:
                    described = netpol.describe_peer(peer)
                    assert described == netpol.INTERNET, (
                        f"{name}: {policy['metadata']['name']}: {described}"
                    )


# --- the evaluator itself: a wrong netpol.py would make the tests above meaningless ----------


def selected(name: str, ports: dict[str, tuple[int, str]]) -> netpol.Pod:
    return netpol.Pod(name, "ns", {netpol.NAME: name}, ports)


def policy(spec: Doc) -> Doc:
    return {"kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "port", "expected"),
    [
        ({"podSelector": {}, "policyTypes": ["Ingress"]}, 80, False),  # deny
        ({"podSelector": {"matchLabels": {netpol.NAME: "other"}}}, 80, True),  # not selected
        ({"podSelector": {}, "ingress": [{}]}, 80, True),  # an empty rule admits all
        ({"podSelector": {}, "ingress": [{"ports": [{"port": "web"}]}]}, 80, True),
        ({"podSelector": {}, "ingress": [{"ports": [{"port": "web"}]}]}, 81, False),
        ({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "protocol": "UDP"}]}]}, 80, False),
        ({"podSelector": {}, "ingress": [{"ports": [{"port": 79, "endPort": 81}]}]}, 80, True),
        (
            {
                "podSelector": {},
                "ingress": [
                    {
                        "from": [
                            {
                                "podSelector": {
                                    "matchExpressions": [
                                        {"key": netpol.NAME, "operator": "In", "values": ["a"]}
                                    ]
                                }
                            }
                        ]
                    }
                ],
            },
            80,
            True,
        ),
        (
            {
                "podSelector": {},
                "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {}}]}],
            },
            80,
            True,
        ),
        (
            {
                "podSelector": {},
                "ingress": [
                    {"from": [{"namespaceSelector": {"matchLabels": {netpol.NAMESPACE_NAME: "x"}}}]}
                ],
            },
            80,
            False,
        ),
        (
            {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]},
            80,
            False,
        ),
    ],
)
def test_the_evaluator_follows_the_networkpolicy_rules(
    spec: Doc, port: int, expected: bool
) -> None:
    source = selected("a", {})
    destination = selected("b", {"web": (80, "TCP")})
    assert netpol.allowed([policy(spec)], source, destination, port) is expected
