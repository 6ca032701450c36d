"""The dev overlay's NATS as a three-node cluster (components/nats-cluster, overlays/dev-cluster,
issue 24): three routed nodes behind a headless Service, the services given every node's URL
and the streams at three replicas, and a configuration nats-server accepts as built (the other
checks, schemas, checkov, NetworkPolicies, run over every overlay, this one included)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from switchboard import bus, natsauth
from switchboard.embedded import nats_server_binary

from .conftest import Builds
from .manifests import NATS_AUTH_MOUNT, OVERLAYS, Doc, container_of, mounted_volume

NODES = 3


def objects(built: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in built if d["kind"] == kind}


def port_of(service: Doc, name: str) -> int:
    (port,) = [p["port"] for p in service["spec"]["ports"] if p["name"] == name]
    return int(port)


def test_three_nodes_routed_through_a_headless_service_and_every_url_given(
    builds: Builds,
) -> None:
    built = builds.docs(OVERLAYS["dev-cluster"])
    nats = objects(built, "StatefulSet")["nats"]
    assert nats["spec"]["replicas"] == NODES
    assert nats["spec"]["podManagementPolicy"] == "Parallel"  # nodes find each other to be ready
    headless = objects(built, "Service")[nats["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    name, client = headless["metadata"]["name"], port_of(headless, "client")
    routes = port_of(headless, "cluster")
    nodes = [f"nats-{i}.{name}" for i in range(NODES)]

    data = objects(built, "ConfigMap")["switchboard-config"]["data"]
    assert data["SB_NATS_REPLICAS"] == str(NODES)
    assert bus.servers(data["SB_NATS_URL"]) == [f"nats://{n}:{client}" for n in nodes]

    _, container = container_of(built, "StatefulSet", "nats")
    names = [e["name"] for e in container["env"]]
    values = {e["name"]: e.get("value") for e in container["env"]}
    for i, node in enumerate(nodes):  # after the password they refer to (Kubernetes' rule)
        route = f"NATS_ROUTE_{i}"
        assert values[route] == f"nats-route://route:$(SB_NATS_PASSWORD_ADMIN)@{node}:{routes}"
        assert names.index(route) > names.index("SB_NATS_PASSWORD_ADMIN")

    budgets = [
        b
        for b in objects(built, "PodDisruptionBudget").values()
        if b["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "nats"}
    ]
    assert [b["spec"]["maxUnavailable"] for b in budgets] == [1], "one node drained at a time"


def expanded_env(container: Doc, pod_name: str, secrets: dict[str, str]) -> dict[str, str]:
    """The environment Kubernetes gives the container: Secret keys, the pod's name, and
    ``$(VAR)`` replaced by the value of a variable defined earlier."""
    env: dict[str, str] = {}
    for entry in container["env"]:
        source = entry.get("valueFrom", {})
        if "secretKeyRef" in source:
            env[entry["name"]] = secrets[source["secretKeyRef"]["key"]]
        elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[entry["name"]] = pod_name
        else:
            env[entry["name"]] = re.sub(
                r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), entry["value"]
            )
    return env


def test_nats_server_accepts_the_built_configuration(builds: Builds, tmp_path: Path) -> None:
    """The -c file and the auth.conf it includes, from the built ConfigMaps, in one directory as
    mounted, with the environment a pod gets: `nats-server -t` finds it valid; the routes carry
    the password the route authorization asks for."""
    built = builds.docs(OVERLAYS["dev-cluster"])
    pod, container = container_of(built, "StatefulSet", "nats")
    arguments = container["args"]
    config_path = arguments[arguments.index("-c") + 1]
    assert Path(config_path).parent == Path(NATS_AUTH_MOUNT).parent, "auth.conf beside it"
    maps = objects(built, "ConfigMap")
    for path in (config_path, NATS_AUTH_MOUNT):
        volume = mounted_volume(pod, container, path)
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == path]
        text = maps[volume["configMap"]["name"]]["data"][mount["subPath"]]
        (tmp_path / Path(path).name).write_text(text)
    config = (tmp_path / Path(config_path).name).read_text()
    assert "include ./auth.conf" in config
    assert "authorization { user: route, password: $SB_NATS_PASSWORD_ADMIN }" in config

    secrets = natsauth.Credentials.generate().server_env()
    env = expanded_env(container, "nats-1", secrets)
    assert env["NATS_ROUTE_0"].startswith(
        f"nats-route://route:{secrets['SB_NATS_PASSWORD_ADMIN']}@"
    )
    command = [str(nats_server_binary()), "-t", "-c", str(tmp_path / Path(config_path).name)]
    checked = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The check can fail: without the password variables the included auth.conf is refused.
    del env["SB_NATS_PASSWORD_ADMIN"]
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "SB_NATS_PASSWORD_ADMIN" in refused.stdout + refused.stderr
