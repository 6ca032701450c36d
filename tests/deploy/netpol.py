"""What the NetworkPolicies of a kustomize build allow, evaluated offline (tests/deploy/
test_network_policies.py): the pods of the build's workloads, and for a pair of them and a port
whether both the source's egress and the destination's ingress admit the connection, by the
rules of networking.k8s.io/v1 (a pod no policy isolates is open; policies add up; an empty peer
list or port list matches everything; named ports are the destination pod's).

An ipBlock never matches a pod here: the tests check separately that every ipBlock leaves out
the private ranges that pods and Services live in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Doc = dict[str, Any]
NAME = "app.kubernetes.io/name"
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # the label every namespace carries
WORKLOADS = {"Deployment", "StatefulSet"}


@dataclass(frozen=True)
class Pod:
    name: str  # its app.kubernetes.io/name
    namespace: str
    labels: dict[str, str]
    ports: dict[str, tuple[int, str]]  # port name -> (number, protocol)

    @property
    def numbers(self) -> set[tuple[int, str]]:
        return set(self.ports.values())


def pods(docs: list[Doc]) -> list[Pod]:
    """One pod per workload of the build (its replicas have the same labels and ports)."""
    found = []
    for doc in docs:
        if doc["kind"] not in WORKLOADS:
            continue
        template = doc["spec"]["template"]
        labels: dict[str, str] = template["metadata"]["labels"]
        ports = {
            port["name"]: (port["containerPort"], port.get("protocol", "TCP"))
            for container in template["spec"]["containers"]
            for port in container.get("ports", [])
        }
        found.append(Pod(labels[NAME], namespace(doc), labels, ports))
    return found


def namespace(doc: Doc) -> str:
    return str(doc["metadata"].get("namespace", "default"))


def policies(docs: list[Doc]) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] == "NetworkPolicy"]


def selects(selector: Doc, labels: dict[str, str]) -> bool:
    """A LabelSelector ({} selects everything)."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        present = key in labels
        matched = {
            "In": present and labels.get(key) in (values or []),
            "NotIn": not present or labels.get(key) not in (values or []),
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]
        if not matched:
            return False
    return True


def policy_types(policy: Doc) -> set[str]:
    spec = policy["spec"]
    if "policyTypes" in spec:
        return set(spec["policyTypes"])
    return {"Ingress", *(["Egress"] if "egress" in spec else [])}


def applies_to(policy: Doc, pod: Pod) -> bool:
    return namespace(policy) == pod.namespace and selects(policy["spec"]["podSelector"], pod.labels)


def peer_matches(peer: Doc, policy: Doc, pod: Pod) -> bool:
    """Whether a from/to entry of ``policy`` designates ``pod``."""
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        namespace_labels = {NAMESPACE_NAME: pod.namespace}
        if not selects(peer["namespaceSelector"], namespace_labels):
            return False
    elif namespace(policy) != pod.namespace:
        return False
    return selects(peer.get("podSelector", {}), pod.labels)


def port_matches(entry: Doc, destination: Pod, number: int, protocol: str) -> bool:
    if entry.get("protocol", "TCP") != protocol:
        return False
    port = entry.get("port")
    if port is None:
        return True
    if isinstance(port, str):
        return destination.ports.get(port) == (number, protocol)
    first = int(port)
    return first <= number <= int(entry.get("endPort", first))


def rule_admits(
    rule: Doc, peers_key: str, policy: Doc, peer: Pod, destination: Pod, port: int, protocol: str
) -> bool:
    peers = rule.get(peers_key)
    if peers and not any(peer_matches(p, policy, peer) for p in peers):
        return False
    entries = rule.get("ports")
    return not entries or any(port_matches(e, destination, port, protocol) for e in entries)


def direction_allows(
    all_policies: list[Doc],
    direction: str,
    subject: Pod,
    peer: Pod,
    destination: Pod,
    port: int,
    protocol: str,
) -> bool:
    """``direction`` "Ingress": may ``subject`` (the destination) receive from ``peer``;
    "Egress": may ``subject`` (the source) send to ``peer`` (the destination)."""
    isolating = [p for p in all_policies if applies_to(p, subject) and direction in policy_types(p)]
    if not isolating:
        return True
    rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    return any(
        rule_admits(rule, peers_key, policy, peer, destination, port, protocol)
        for policy in isolating
        for rule in policy["spec"].get(rules_key) or []
    )


def allowed(
    all_policies: list[Doc], source: Pod, destination: Pod, port: int, protocol: str = "TCP"
) -> bool:
    """Whether ``source`` may open a connection to ``destination``'s ``port``."""
    return direction_allows(
        all_policies, "Egress", source, destination, destination, port, protocol
    ) and direction_allows(
        all_policies, "Ingress", destination, source, destination, port, protocol
    )


def flows(docs: list[Doc], direction: str | None = None) -> set[tuple[str, str, int]]:
    """Every (source, destination, port) between the build's pods that the policies allow; with
    ``direction`` ("Ingress", "Egress"), what that side alone allows (the other side open)."""
    all_policies = policies(docs)
    every_pod = pods(docs)

    def admitted(source: Pod, destination: Pod, number: int, protocol: str) -> bool:
        if direction == "Ingress":
            return direction_allows(
                all_policies, direction, destination, source, destination, number, protocol
            )
        if direction == "Egress":
            return direction_allows(
                all_policies, direction, source, destination, destination, number, protocol
            )
        return allowed(all_policies, source, destination, number, protocol)

    return {
        (source.name, destination.name, number)
        for source in every_pod
        for destination in every_pod
        for number, protocol in destination.numbers
        if admitted(source, destination, number, protocol)
    }


# What an ipBlock must leave out to stay off the cluster: the private, shared (CGNAT),
# link-local (cloud metadata) and loopback ranges.
PRIVATE_RANGES = {
    "0.0.0.0/0": {
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "169.254.0.0/16",
        "127.0.0.0/8",
    },
    "::/0": {"fc00::/7", "fe80::/10", "::1/128"},
}
INTERNET = "the internet"
ANYWHERE = "anywhere"


def describe_peer(peer: Doc) -> str | None:
    """How a from/to entry reads when it reaches outside the namespace's pods (None: it names
    pods of the policy's own namespace, which :func:`flows` covers)."""
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        private = PRIVATE_RANGES.get(block["cidr"])
        if private is not None and private <= set(block.get("except", [])):
            return INTERNET
        return f"ipBlock {block['cidr']} except {block.get('except', [])}"
    if "namespaceSelector" not in peer:
        return None
    selector = peer["namespaceSelector"]
    name = selector.get("matchLabels", {}).get(NAMESPACE_NAME)
    where = f"namespace {name}" if name and set(selector) == {"matchLabels"} else f"{selector}"
    pods_labels = peer.get("podSelector", {}).get("matchLabels", {})
    return where + "".join(f" {key}={value}" for key, value in sorted(pods_labels.items()))


def outside_rules(docs: list[Doc]) -> set[tuple[str, str, str, int | str, str]]:
    """(direction, pod, peer, port, protocol) of every rule that reaches beyond the namespace's
    own pods: other namespaces, address blocks, or any address (a rule with no peers)."""
    every_pod = pods(docs)
    found = set()
    for policy in policies(docs):
        subjects = [pod for pod in every_pod if applies_to(policy, pod)]
        for direction, rules_key, peers_key in (
            ("ingress", "ingress", "from"),
            ("egress", "egress", "to"),
        ):
            for rule in policy["spec"].get(rules_key) or []:
                peers = rule.get(peers_key)
                outside = [describe_peer(p) for p in peers] if peers else [ANYWHERE]
                for pod in subjects:
                    for entry in rule.get("ports") or [{}]:
                        port = entry.get("port", "all")
                        protocol = entry.get("protocol", "TCP")
                        if direction == "ingress" and isinstance(port, str) and port in pod.ports:
                            port = pod.ports[port][0]
                        for peer in outside:
                            if peer is not None:
                                found.add((direction, pod.name, peer, port, protocol))
    return found
