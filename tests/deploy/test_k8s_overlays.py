"""The Kubernetes overlays survive (issue 15): every overlay builds and passes strict schema
validation (test_deploy.py) and checkov (below, each skip with its reason); disruption budgets,
autoscaling, the Ingress with TLS, the shared workspaces volume, the dev dependencies. The
builds are made once per session (conftest.py)."""

from __future__ import annotations

import importlib
from urllib.parse import urlsplit

import pytest

from switchboard import registry
from switchboard.bus import Subjects
from switchboard.registry import Service
from switchboard_tools.config import CONSUMER

from . import netpol
from .conftest import Builds
from .manifests import OVERLAYS, SERVICES, WORKSPACES, WORKSPACES_CLAIM, Doc, container_env
from .validation import checkov_failures

NAME = "app.kubernetes.io/name"
AUTOSCALED = {"gateway", "agent"}  # HorizontalPodAutoscalers (issue 15)
KEDA_SCALED = "tools"  # the ScaledObject on the TOOLS consumer's backlog
NATS_MONITOR_PORT = 8222


def objects_of(built: list[Doc], kind: str) -> dict[str, Doc]:
    return {doc["metadata"]["name"]: doc for doc in built if doc["kind"] == kind}


def pod_spec(workload: Doc) -> Doc:
    spec: Doc = workload["spec"]["template"]["spec"]
    return spec


def config(built: list[Doc]) -> dict[str, str]:
    data: dict[str, str] = objects_of(built, "ConfigMap")["switchboard-config"]["data"]
    return data


def test_every_container_of_every_overlay_is_probed(overlay: tuple[str, list[Doc]]) -> None:
    """What test_deploy.py checks in the base files holds after the overlays' patches, for the
    dev dependencies too: Kubernetes restarts a container that hangs and routes no traffic to
    one that is not ready."""
    name, built = overlay
    workloads = [d for d in built if d["kind"] in {"Deployment", "StatefulSet"}]
    assert workloads, f"{name}: no workloads"
    for workload in workloads:
        for container in pod_spec(workload)["containers"]:
            for probe in ("livenessProbe", "readinessProbe"):
                assert container.get(probe), f"{name}: {workload['metadata']['name']}: {probe}"


# --- disruption budgets ------------------------------------------------------------------------


def test_every_deployment_has_one_disruption_budget_that_never_blocks_a_drain(
    overlay: tuple[str, list[Doc]],
) -> None:
    name, built = overlay
    budgets = objects_of(built, "PodDisruptionBudget").values()
    for deployment in objects_of(built, "Deployment").values():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        matching = [
            b
            for b in budgets
            if all(labels.get(k) == v for k, v in b["spec"]["selector"]["matchLabels"].items())
        ]
        where = f"{name}: {deployment['metadata']['name']}"
        assert len(matching) == 1, f"{where}: {len(matching)} PodDisruptionBudgets"
        (budget,) = matching
        assert budget["spec"].get("maxUnavailable") == 1, f"{where}: maxUnavailable 1"
        assert "minAvailable" not in budget["spec"], f"{where}: minAvailable can block a drain"


# --- replicas and autoscaling (prod) -------------------------------------------------------


def minimum_replicas(built: list[Doc], deployment: Doc) -> int:
    """The fewest pods a Deployment runs: its autoscaler's minimum, else its replicas."""
    name = deployment["metadata"]["name"]
    hpas = [
        h
        for h in objects_of(built, "HorizontalPodAutoscaler").values()
        if h["spec"]["scaleTargetRef"]["name"] == name
    ]
    scaled = [
        s
        for s in objects_of(built, "ScaledObject").values()
        if s["spec"]["scaleTargetRef"]["name"] == name
    ]
    if hpas or scaled:
        assert "replicas" not in deployment["spec"], f"{name}: replicas fights its autoscaler"
        assert len(hpas) + len(scaled) == 1, f"{name}: scaled twice"
        return int(hpas[0]["spec"]["minReplicas"] if hpas else scaled[0]["spec"]["minReplicaCount"])
    return int(deployment["spec"].get("replicas", 1))


def read_write_once_claims(built: list[Doc], deployment: Doc) -> list[str]:
    claims = objects_of(built, "PersistentVolumeClaim")
    return [
        volume["persistentVolumeClaim"]["claimName"]
        for volume in pod_spec(deployment).get("volumes", [])
        if "persistentVolumeClaim" in volume
        and "ReadWriteOnce"
        in claims[volume["persistentVolumeClaim"]["claimName"]]["spec"]["accessModes"]
    ]


def test_prod_runs_two_pods_of_everything_but_single_volume_services(
    prod_build: list[Doc],
) -> None:
    """Two pods at least, so one survives a node; a service on a ReadWriteOnce volume (media's
    store) runs one, replaced with Recreate (two pods cannot share the volume across nodes)."""
    for name, deployment in objects_of(prod_build, "Deployment").items():
        fewest = minimum_replicas(prod_build, deployment)
        if read_write_once_claims(prod_build, deployment):
            assert fewest == 1, f"{name}: one pod on its ReadWriteOnce volume"
            assert deployment["spec"]["strategy"]["type"] == "Recreate", name
        else:
            assert fewest >= 2, f"{name}: {fewest} pod(s) do not survive a node"


def test_prod_spreads_replicas_over_nodes_and_zones(prod_build: list[Doc]) -> None:
    for name, deployment in objects_of(prod_build, "Deployment").items():
        constraints = pod_spec(deployment).get("topologySpreadConstraints", [])
        keys = {c["topologyKey"] for c in constraints}
        assert {"kubernetes.io/hostname", "topology.kubernetes.io/zone"} <= keys, name
        for constraint in constraints:
            labels = deployment["spec"]["template"]["metadata"]["labels"]
            assert netpol.selects(constraint["labelSelector"], labels), f"{name}: own pods"
            assert "pod-template-hash" in constraint.get("matchLabelKeys", []), (
                f"{name}: without pod-template-hash the spread counts every service's pods"
            )


def test_prod_autoscales_the_gateway_and_agent_on_cpu(prod_build: list[Doc]) -> None:
    hpas = objects_of(prod_build, "HorizontalPodAutoscaler")
    assert set(hpas) == AUTOSCALED
    deployments = objects_of(prod_build, "Deployment")
    for name, hpa in hpas.items():
        target = hpa["spec"]["scaleTargetRef"]
        assert (target["apiVersion"], target["kind"], target["name"]) == (
            "apps/v1",
            "Deployment",
            name,
        )
        assert hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"] >= 2, name
        (metric,) = hpa["spec"]["metrics"]
        assert metric["resource"]["name"] == "cpu", name
        (container,) = pod_spec(deployments[name])["containers"]
        assert "cpu" in container["resources"]["requests"], f"{name}: CPU % needs a request"


def test_keda_scales_the_executors_on_the_tools_consumer_backlog(prod_build: list[Doc]) -> None:
    """The ScaledObject (its schema is checked with the build) reads the consumer the executors
    pull from (switchboard_tools), of the TOOLS stream under the deployed subject prefix, from
    the monitoring endpoint of the NATS server the services use."""
    (scaled,) = objects_of(prod_build, "ScaledObject").values()
    assert scaled["spec"]["scaleTargetRef"]["name"] == KEDA_SCALED
    assert "tools" in registry.names() and registry.get(KEDA_SCALED).scaled
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "nats-jetstream"
    settings = trigger["metadata"]
    prefix = config(prod_build)["SB_SUBJECT_PREFIX"]
    assert settings["stream"] == Subjects(prefix).stream("TOOLS")
    assert settings["consumer"] == CONSUMER
    assert settings["account"] == "$G", "users of an authorization block are in the global account"
    assert int(settings["lagThreshold"]) >= 1
    nats = urlsplit(config(prod_build)["SB_NATS_URL"])
    host, _, port = settings["natsServerMonitoringEndpoint"].rpartition(":")
    assert (host, int(port)) == (nats.hostname, NATS_MONITOR_PORT), "the services' NATS server"
    assert scaled["spec"]["minReplicaCount"] >= 2


def test_dev_needs_no_autoscaler(dev_build: list[Doc]) -> None:
    """A development cluster has no KEDA (its CRD would be missing) and often no metrics."""
    kinds = {doc["kind"] for doc in dev_build}
    assert not kinds & {"ScaledObject", "HorizontalPodAutoscaler"}


# --- the Ingress (prod) ---------------------------------------------------------------------


def test_prod_serves_the_gateway_through_an_ingress_with_tls(prod_build: list[Doc]) -> None:
    (ingress,) = objects_of(prod_build, "Ingress").values()
    gateway = registry.get("gateway")
    public = [p for p in gateway.ports if p.public]
    assert public, "the gateway has a public port"
    services = objects_of(prod_build, "Service")
    backends = [
        path["backend"]["service"]
        for rule in ingress["spec"]["rules"]
        for path in rule["http"]["paths"]
    ]
    assert backends, "no backend"
    for backend in backends:
        assert backend["name"] == gateway.name, "only the gateway takes outside traffic"
        ports = {p["name"]: p["port"] for p in services[gateway.name]["spec"]["ports"]}
        assert backend["port"].get("name") in {p.name for p in public} & set(ports)
    tls = ingress["spec"]["tls"]
    covered = {host for entry in tls for host in entry["hosts"]}
    assert {rule["host"] for rule in ingress["spec"]["rules"]} <= covered, "every host on TLS"
    secrets = {entry["secretName"] for entry in tls}
    assert all(secrets), "a TLS Secret for each entry"
    assert not secrets & set(objects_of(prod_build, "Secret")), "no certificate in the manifests"
    annotations = ingress["metadata"].get("annotations", {})
    issuer = annotations.get("cert-manager.io/cluster-issuer") or annotations.get(
        "cert-manager.io/issuer"
    )
    assert issuer, "cert-manager issues and renews the certificate"
    assert annotations.get("nginx.ingress.kubernetes.io/force-ssl-redirect") == "true"


# --- the workspaces volume --------------------------------------------------------------------


def reads_workspaces(service: Service) -> bool:
    """Whether a service's settings have SB_WORKSPACES_DIR (its settings class says)."""
    module, cls = service.settings_class.split(":")
    return "workspaces_dir" in getattr(importlib.import_module(module), cls).model_fields


def test_every_service_reading_workspaces_mounts_the_one_shared_volume(
    overlay: tuple[str, list[Doc]],
) -> None:
    """Agent, tools and scheduler (the services whose settings read SB_WORKSPACES_DIR) mount
    the same PersistentVolumeClaim at the same path, so that what the tools write the agent
    reads, on any replica; the scheduler only reads. Nothing else mounts it."""
    name, built = overlay
    deployments = objects_of(built, "Deployment")
    readers = {s.name for s in SERVICES if reads_workspaces(s)}
    assert {"agent", "tools"} <= readers
    for service in SERVICES:
        pod = pod_spec(deployments[service.name])
        (container,) = pod["containers"]
        claims = {
            v["name"]: v["persistentVolumeClaim"]
            for v in pod.get("volumes", [])
            if v.get("persistentVolumeClaim", {}).get("claimName") == WORKSPACES_CLAIM
        }
        where = f"{name}: {service.name}"
        if service.name not in readers:
            assert not claims, f"{where}: mounts the workspaces without reading them"
            continue
        assert container_env(container).get("SB_WORKSPACES_DIR") == WORKSPACES, where
        (mount,) = [m for m in container["volumeMounts"] if m["name"] in claims]
        assert mount["mountPath"] == WORKSPACES, where
        writes = service.name != "scheduler"
        assert bool(mount.get("readOnly")) is not writes, f"{where}: readOnly must be {not writes}"


def test_the_workspaces_volume_fits_the_overlay(overlay: tuple[str, list[Doc]]) -> None:
    """prod: ReadWriteMany on a named storage class (replicas on any node); dev: ReadWriteOnce
    for the single node of a development cluster (k8s/README.md)."""
    name, built = overlay
    claim = objects_of(built, "PersistentVolumeClaim")[WORKSPACES_CLAIM]["spec"]
    if name == "prod":
        assert claim["accessModes"] == ["ReadWriteMany"]
        assert claim.get("storageClassName"), "prod names a ReadWriteMany storage class"
    else:
        assert claim["accessModes"] == ["ReadWriteOnce"]


# --- the dev dependencies ---------------------------------------------------------------------


def test_dev_runs_nats_with_persistent_jetstream_and_postgres_and_qdrant(
    dev_build: list[Doc],
) -> None:
    sets = objects_of(dev_build, "StatefulSet")
    assert {"nats", "postgres", "qdrant"} <= set(sets)
    nats = sets["nats"]
    (container,) = pod_spec(nats)["containers"]
    arguments = container["args"]
    assert "-js" in arguments, "JetStream on"
    store = arguments[arguments.index("-sd") + 1]
    templates = {t["metadata"]["name"] for t in nats["spec"]["volumeClaimTemplates"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts.get(store) in templates, "JetStream's store on a PersistentVolumeClaim"
    for name in ("postgres", "qdrant"):
        assert sets[name]["spec"]["volumeClaimTemplates"], f"{name}: data on a volume"
    services = objects_of(dev_build, "Service")
    qdrant = urlsplit(config(dev_build)["SB_QDRANT_URL"])
    assert qdrant.hostname in services and qdrant.port in {
        p["port"] for p in services["qdrant"]["spec"]["ports"]
    }


# --- checkov ------------------------------------------------------------------------------------

IMAGE_TAGS = (
    "images are chosen per overlay by tag: dev's are built locally and loaded into the "
    "cluster (no registry, no digest); prod's `images:` name the release's tag, and its "
    "digest once pushed"
)
# Checks that fail on purpose: check id -> (why, the overlays and resources it fails on).
ACCEPTED = {
    "CKV_K8S_15": (
        "imagePullPolicy Always: " + IMAGE_TAGS + "; Always would make every restart depend on "
        "the registry (and fail for dev's local images)",
        None,
    ),
    "CKV_K8S_43": ("image digests: " + IMAGE_TAGS, None),
    "CKV_K8S_35": (
        "secrets in environment variables: the services read their settings from the "
        "environment (one pydantic-settings object each), and nats-server and PostgreSQL read "
        "their passwords there; each container takes only its own keys by secretKeyRef "
        "(test_deploy_credentials.py), never envFrom a Secret",
        None,
    ),
    "CKV_K8S_40": (
        "high UID: the dev dependencies run as their images' own users (nats 1000, postgres "
        "999, qdrant 1000), who own the images' files; non-root anyway, and production uses "
        "managed servers",
        {
            (dev, f"StatefulSet.switchboard.{server}")
            for dev in ("dev", "dev-cluster")
            for server in ("nats", "postgres", "qdrant")
        },
    ),
}


@pytest.fixture(scope="session")
def checkov_results(
    builds: Builds, tmp_path_factory: pytest.TempPathFactory
) -> set[tuple[str, str, str]]:
    """(overlay, check id, resource) of checkov's failures on the overlays' builds (one run)."""
    directory = tmp_path_factory.mktemp("checkov")
    for name, kustomization in OVERLAYS.items():
        (directory / f"{name}.yaml").write_text(builds.text(kustomization))
    return checkov_failures([directory / f"{name}.yaml" for name in OVERLAYS])


def test_checkov_passes_but_for_the_accepted_checks(
    checkov_results: set[tuple[str, str, str]],
) -> None:
    unexplained = []
    for name, check, resource in sorted(checkov_results):
        reason, only = ACCEPTED.get(check, ("", None))
        if not reason or (only is not None and (name, resource) not in only):
            unexplained.append(f"{name}: {check} on {resource}")
    assert not unexplained, "checkov failures without a reason:\n" + "\n".join(unexplained)


def test_every_accepted_checkov_failure_still_happens(
    checkov_results: set[tuple[str, str, str]],
) -> None:
    """An accepted failure that no longer happens is removed from ACCEPTED (no stale skips)."""
    seen = {check for _, check, _ in checkov_results}
    assert not set(ACCEPTED) - seen, f"no longer failing: {sorted(set(ACCEPTED) - seen)}"
