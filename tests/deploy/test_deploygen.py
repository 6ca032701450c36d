"""The deployment files come from the registry (issue 26, item 7): a new registry entry gets its
Compose service, its Kubernetes Deployment, Service, PodDisruptionBudget and NetworkPolicy and
its NATS user from `python -m switchboard.deploygen`, and `--check` (in `make lint`) fails when
a generated line was edited by hand.

The generator runs on a copy of docker-compose.yml and k8s/ in a temporary directory; the new
entry is added to a copy of the registry's table (monkeypatched for this process only)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from switchboard import natsauth, registry
from switchboard.cli.secrets_env import env_file
from switchboard.deploygen import configfile
from switchboard.deploygen.__main__ import main
from switchboard.registry import Port, Service

from .manifests import (
    ROOT,
    SECRET,
    Doc,
    container_env,
    load_doc,
    load_docs,
    objects,
    run_tool,
    secret_refs,
    secret_sources,
)
from .validation import validate_strictly

EXAMPLE = Service(
    "example",
    "an example service: it stores examples",
    (Port("grpc", 50061, "SB_EXAMPLE_GRPC_PORT"), Port("ops", 9107, "SB_OPS_PORT")),
    needs=("nats", "postgres"),
    calls=("memory",),
)


def copy_of_the_deployment(tmp_path: Path) -> Path:
    """docker-compose.yml, k8s/ and config/ (all the generator reads and writes) in a scratch
    root."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "docker-compose.yml", root / "docker-compose.yml")
    example = root / configfile.EXAMPLE_PATH  # not a person's own config/switchboard.toml
    example.parent.mkdir()
    shutil.copy(ROOT / configfile.EXAMPLE_PATH, example)
    shutil.copytree(ROOT / "k8s", root / "k8s", ignore=shutil.ignore_patterns("secrets.env"))
    return root


def check(root: Path) -> subprocess.CompletedProcess[str]:
    """`python -m switchboard.deploygen --check` on a root, as `make lint` runs it."""
    command = [sys.executable, "-m", "switchboard.deploygen", "--check", "--root", str(root)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_committed_files_are_what_the_registry_generates() -> None:
    result = check(ROOT)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def with_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the deployment, generated again with one more registry entry."""
    root = copy_of_the_deployment(tmp_path)
    monkeypatch.setattr(registry, "SERVICES", (*registry.SERVICES, EXAMPLE))
    assert main(["--check", "--root", str(root)]) == 1, "the new entry has no files yet"
    assert main(["--root", str(root)]) == 0
    assert main(["--check", "--root", str(root)]) == 0
    return root


def test_a_new_entry_gets_its_compose_service(with_example: Path) -> None:
    services = load_doc(with_example / "docker-compose.yml")["services"]
    example = services["example"]
    assert example["build"]["args"] == {"SERVICE": "example"}
    assert example["image"].startswith("switchboard/example:")
    assert example["read_only"] is True and example["cap_drop"] == ["ALL"]
    environment = example["environment"]
    assert environment["OTEL_SERVICE_NAME"] == "switchboard-example"
    assert environment["SB_EXAMPLE_GRPC_HOST"] == "0.0.0.0"
    assert environment["SB_EXAMPLE_GRPC_PORT"] == "50061"
    assert environment["SB_OPS_PORT"] == "9107"
    assert environment["SB_MEMORY_ADDR"] == "memory:50053"
    assert environment["SB_NATS_USER"] == "example"
    assert environment["SB_NATS_PASSWORD"].startswith("${SB_NATS_PASSWORD_EXAMPLE:?")
    assert environment["SB_SERVICE_TOKEN"].startswith("${SB_SERVICE_TOKEN:?")
    assert "${POSTGRES_PASSWORD:?" in environment["SB_DATABASE_URL"]
    assert "127.0.0.1:9107/healthz" in " ".join(example["healthcheck"]["test"])
    assert set(example["depends_on"]) == {"nats", "postgres", "memory"}
    assert "replicas" in example["deploy"], "scaled by default, as the registry says"
    nats_env = services["nats"]["environment"]
    assert nats_env["SB_NATS_PASSWORD_EXAMPLE"].startswith("${SB_NATS_PASSWORD_EXAMPLE:?")
    assert set(services) >= set(registry.names()), "no other service lost"


def test_a_new_entry_gets_its_kubernetes_objects(with_example: Path) -> None:
    base = with_example / "k8s" / "base"
    manifest = base / "example.yaml"
    assert objects(manifest, "ServiceAccount")["example"]["automountServiceAccountToken"] is False
    service = objects(manifest, "Service")["example"]
    assert {(p["name"], p["port"]) for p in service["spec"]["ports"]} == {
        ("grpc", 50061),
        ("ops", 9107),
    }
    pod = objects(manifest, "Deployment")["example"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["port"] == "ops"
    env = container_env(container)
    assert env["SB_NATS_USER"] == "example" and env["SB_MEMORY_ADDR"] == "memory:50053"
    refs = {name: ref["key"] for name, ref in secret_refs(container).items()}
    assert refs == {
        "SB_NATS_PASSWORD": "SB_NATS_PASSWORD_EXAMPLE",
        "SB_SERVICE_TOKEN": "SB_SERVICE_TOKEN",
        "SB_DATABASE_URL": "SB_DATABASE_URL",
    }
    assert "example.yaml" in load_doc(base / "kustomization.yaml")["resources"]
    budget = objects(base / "disruption-budgets.yaml", "PodDisruptionBudget")["example"]
    assert budget["spec"]["maxUnavailable"] == 1

    policies = objects(base / "network-policies.yaml", "NetworkPolicy")
    egress = policies["example"]["spec"]["egress"]
    to_memory = [rule for rule in egress if "to" in rule and "podSelector" in rule["to"][0]]
    assert [r["ports"] for r in to_memory] == [[{"port": 50053}]], "gRPC to what it calls"
    assert {"ports": [{"port": 4222}, {"port": 5432}]} in egress, "NATS and PostgreSQL"
    memory_callers = policies["memory"]["spec"]["ingress"][0]["from"][0]["podSelector"]
    assert "example" in memory_callers["matchExpressions"][0]["values"], "memory admits it"

    prod = load_doc(with_example / "k8s" / "overlays" / "prod" / "kustomization.yaml")
    assert "switchboard/example" in {image["name"] for image in prod["images"]}


def test_a_new_entry_gets_its_nats_user(with_example: Path) -> None:
    auth = (with_example / natsauth.DEPLOY_CONFIG).read_text()
    assert auth == natsauth.server_config()
    assert "{user: example, password: $SB_NATS_PASSWORD_EXAMPLE, permissions: {" in auth
    assert "_INBOX_example.>" in natsauth.permissions("example").subscribe
    dev = with_example / "k8s" / "components" / "dev-dependencies"
    (nats,) = [d for d in load_docs(dev / "nats.yaml") if d["kind"] == "StatefulSet"]
    (container,) = nats["spec"]["template"]["spec"]["containers"]
    assert secret_refs(container)["SB_NATS_PASSWORD_EXAMPLE"] == {
        "name": SECRET,
        "key": "SB_NATS_PASSWORD_EXAMPLE",
    }
    clients = objects(dev / "network-policies.yaml", "NetworkPolicy")
    for server in ("nats", "postgres"):
        selector = clients[server]["spec"]["ingress"][0]["from"][0]["podSelector"]
        assert "example" in selector["matchExpressions"][0]["values"], f"{server} admits it"


def test_a_new_entry_builds_and_validates_in_every_overlay(
    with_example: Path, tmp_path: Path
) -> None:
    """The dev and prod overlays build with the new service, and every object passes the strict
    schema check (secrets.env written as `switchboard secrets --k8s` would, with its user)."""
    copy = with_example / "k8s"
    for kustomization in sorted(copy.rglob("kustomization.yaml")):
        for source in secret_sources(load_doc(kustomization)):
            (kustomization.parent / source).write_text(env_file(database_url=True))
    for overlay in ("dev", "prod"):
        text = run_tool("kubectl", "kustomize", str(copy / "overlays" / overlay))
        built: list[Doc] = [doc for doc in YAML(typ="safe").load_all(text) if doc is not None]
        names = {(d["kind"], d["metadata"]["name"]) for d in built}
        for kind in ("Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"):
            assert (kind, "example") in names, f"{overlay}: no {kind} example"
        validate_strictly(built, tmp_path)


def test_check_fails_on_a_hand_edit_of_a_generated_block(tmp_path: Path) -> None:
    root = copy_of_the_deployment(tmp_path)
    compose = root / "docker-compose.yml"
    text = compose.read_text()
    edited = text.replace("replicas: ${SB_AGENT_REPLICAS:-2}", "replicas: ${SB_AGENT_REPLICAS:-3}")
    assert edited != text
    compose.write_text(edited)
    result = check(root)
    assert result.returncode == 1, result.stderr
    assert "docker-compose.yml" in result.stderr and "SB_AGENT_REPLICAS:-3" in result.stderr

    compose.write_text(text)
    router = root / "k8s" / "base" / "router.yaml"
    router.write_text(router.read_text().replace("memory: 96Mi", "memory: 97Mi"))
    result = check(root)
    assert result.returncode == 1 and "k8s/base/router.yaml" in result.stderr, result.stderr


def test_hand_written_lines_outside_the_blocks_are_left_alone(tmp_path: Path) -> None:
    root = copy_of_the_deployment(tmp_path)
    compose = root / "docker-compose.yml"
    compose.write_text(compose.read_text().replace("retries: 5", "retries: 7"))
    assert check(root).returncode == 0
    assert main(["--root", str(root)]) == 0
    assert "retries: 7" in compose.read_text(), "the generator rewrote a hand-written line"


def test_a_damaged_marker_is_a_clear_error(tmp_path: Path) -> None:
    root = copy_of_the_deployment(tmp_path)
    compose = root / "docker-compose.yml"
    before, marker, after = compose.read_text().rpartition("\n  # END generated\n")
    assert marker, "docker-compose.yml has no generated block"
    compose.write_text(before + "\n" + after)  # the last block (the volumes) left open
    result = check(root)
    assert result.returncode == 2
    assert "docker-compose.yml" in result.stderr, result.stderr
    assert "'service volumes' has no END generated" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
