"""What the deployment checks share: where the files are, how to load them, the registry's view
of each service, and the credentials each may hold (tests/deploy/test_*.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from switchboard import natsauth, registry
from switchboard.cli.secrets_env import env_file
from switchboard.registry import Service

Doc = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
BASE = K8S / "base"
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
VENV_BIN = Path(sys.executable).parent  # not resolved: the venv's python may be a symlink
RUNTIME_UID = 10001
WORKSPACES = "/workspaces"
SERVICES = registry.SERVICES
INFRASTRUCTURE = set(registry.INFRASTRUCTURE)  # nats, postgres: deployed, not in the registry
# Compose's observability stack (deploy/): deployed, not in the registry.
OBSERVABILITY = {"otel-collector", "jaeger", "prometheus", "grafana"}
# Images with nothing in them that could run a health check (the collector's is the bare
# binary); nothing may wait for them to be healthy.
NO_HEALTHCHECK = {"otel-collector"}
# The base's files that belong to no single service.
BASE_SHARED = {
    "config.yaml",
    "config-file.yaml",
    "workspaces.yaml",
    "disruption-budgets.yaml",
    "network-policies.yaml",
}
KUSTOMIZATIONS = sorted(K8S.rglob("kustomization.yaml"))
SECRET = "switchboard-secrets"  # the one Secret the base references; overlays provide it
DEV_OVERLAY = K8S / "overlays" / "dev"
PROD_OVERLAY = K8S / "overlays" / "prod"
DEV_CLUSTER_OVERLAY = K8S / "overlays" / "dev-cluster"  # dev with NATS as a three-node cluster
OVERLAYS = {
    "dev": DEV_OVERLAY / "kustomization.yaml",
    "dev-cluster": DEV_CLUSTER_OVERLAY / "kustomization.yaml",
    "prod": PROD_OVERLAY / "kustomization.yaml",
}
WORKSPACES_CLAIM = "workspaces"  # the PersistentVolumeClaim mounted at WORKSPACES
NATS_AUTH_FILE = ROOT / natsauth.DEPLOY_CONFIG
NATS_AUTH_MOUNT = "/etc/nats/auth.conf"
ALL_INTERFACES = "0.0.0.0"
# Model provider settings: optional keys of the Secret, for the service running the LLM loop only.
MODEL_KEYS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "SB_MODEL",
    # failover and budgets (SB_AUTH_PROFILES holds API keys)
    "SB_MODEL_FALLBACKS",
    "SB_MODEL_TIERS",
    "SB_AGENT_MODELS",
    "SB_AUTH_PROFILES",
    "SB_BUDGET",
    "SB_PRICES",
)
MODEL_USERS = {"agent"}
# The media service's transcription provider key (optional).
TRANSCRIPTION_KEYS = ("SB_TRANSCRIPTION_API_KEY",)
TRANSCRIPTION_USERS = {"media"}
# The chat channels' credentials: optional (a channel is served when its keys are set).
CHANNEL_KEYS = (
    "SB_TELEGRAM_BOT_TOKEN",
    "SB_TELEGRAM_WEBHOOK_SECRET",
    "SB_TELEGRAM_ACCOUNTS",
    "SB_SLACK_BOT_TOKEN",
    "SB_SLACK_SIGNING_SECRET",
    "SB_SLACK_ACCOUNTS",
    "SB_DISCORD_BOT_TOKEN",
    "SB_DISCORD_ACCOUNTS",
    "SB_HOOKS_TOKEN",
    "SB_HOOKS_MAPPINGS",
)
CHANNEL_USERS = {"gateway"}
OPTIONAL_KEYS = (*MODEL_KEYS, *CHANNEL_KEYS, *TRANSCRIPTION_KEYS)
# Compose has no SB_DATABASE_URL variable: it builds the URL from the database's password.
COMPOSE_SOURCE = {"SB_DATABASE_URL": "POSTGRES_PASSWORD"}
HARDENED = {
    "runAsNonRoot": True,
    "runAsUser": RUNTIME_UID,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
}


# --- helpers ---------------------------------------------------------------------------------


def service_id(service: Service) -> str:
    return service.name


def load_docs(path: Path) -> list[Doc]:
    """Every non-empty document of a YAML file (merge keys resolved)."""
    return [doc for doc in YAML(typ="safe").load_all(path) if doc is not None]


def load_doc(path: Path) -> Doc:
    (doc,) = load_docs(path)
    return doc


def run_tool(name: str, *args: str) -> str:
    """Run a command-line tool of this virtualenv in the repository root; fail if it fails."""
    tool = VENV_BIN / name
    assert tool.exists(), f"{name} is not installed next to {sys.executable} (run `make install`)"
    return run([str(tool), *args])


def run(command: list[str]) -> str:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"`{' '.join(command)}` failed:\n{output}"
    return output


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def kustomize_entries(spec: Doc) -> list[str]:
    """The resources and components a kustomization pulls in."""
    return [*spec.get("resources", []), *spec.get("components", [])]


def kustomize_inputs(spec: Doc) -> list[str]:
    """Files a kustomization reads that are not whole manifests: patches and generator sources."""
    files = [patch["path"] for patch in spec.get("patches", []) if "path" in patch]
    for generator in (*spec.get("configMapGenerator", []), *spec.get("secretGenerator", [])):
        for source in (*generator.get("files", []), *generator.get("envs", [])):
            files.append(source.split("=", 1)[-1])  # "key=path" or "path"
    return files


def yaml_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in {".yaml", ".yml"} and p.is_file())


def manifest_files() -> list[Path]:
    """Every YAML file under k8s/ that is a Kubernetes manifest (not kustomize's own input)."""
    inputs = {
        (kustomization.parent / name).resolve()
        for kustomization in KUSTOMIZATIONS
        for name in kustomize_inputs(load_doc(kustomization))
    }
    return sorted(
        path
        for path in K8S.rglob("*.y*ml")
        if path.name != "kustomization.yaml" and path.resolve() not in inputs
    )


def objects(path: Path, kind: str) -> dict[str, Doc]:
    """The objects of one kind in a manifest file, by name."""
    return {doc["metadata"]["name"]: doc for doc in load_docs(path) if doc.get("kind") == kind}


def deployments() -> list[Any]:
    """Every Deployment under k8s/, as pytest parameters named file:deployment."""
    return [
        pytest.param(deployment, id=f"{relative(path)}:{name}")
        for path in manifest_files()
        for name, deployment in objects(path, "Deployment").items()
    ]


def compose_services() -> dict[str, Doc]:
    services: dict[str, Doc] = load_doc(COMPOSE_FILE)["services"]
    return services


def base_template(service: Service) -> Doc:
    """The pod template of a service's Deployment in k8s/base/<name>.yaml."""
    deployment = objects(BASE / f"{service.name}.yaml", "Deployment")[service.name]
    template: Doc = deployment["spec"]["template"]
    return template


def base_pod(service: Service) -> Doc:
    pod: Doc = base_template(service)["spec"]
    return pod


def base_container(service: Service) -> Doc:
    (container,) = base_pod(service)["containers"]
    return container


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs; continuation lines joined, comments and blanks dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        keyword, _, arguments = (pending + text).partition(" ")
        instructions.append((keyword.upper(), " ".join(arguments.split())))
        pending = ""
    return instructions


def container_port(container: Doc, port: int | str) -> int:
    """Resolve a probe/annotation port (number or port name) to a declared container port."""
    ports = container.get("ports", [])
    by_name: dict[str, int] = {p["name"]: p["containerPort"] for p in ports if "name" in p}
    resolved = by_name.get(port, 0) if isinstance(port, str) else port
    assert resolved in {p["containerPort"] for p in ports}, f"{container['name']}: no port {port!r}"
    return resolved


def image_repository(image: str) -> str:
    """``switchboard/agent`` of ``switchboard/agent:dev`` (or ``:${SB_IMAGE_TAG:-dev}``)."""
    path, _, name = image.rpartition("/")
    return f"{path}/{name.split(':', 1)[0]}" if path else name.split(":", 1)[0]


def container_env(container: Doc) -> dict[str, Any]:
    """A container's literal env values (None for values taken from Secrets or ConfigMaps)."""
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def mounted_volume(pod: Doc, container: Doc, path: str) -> Doc:
    """The pod volume a container mounts at path ({} when nothing is mounted there)."""
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    return volumes.get(mounts.get(path, ""), {})


def secret_sources(spec: Doc) -> list[str]:
    """The files a kustomization's secretGenerators read (never checked in)."""
    return [
        source.split("=", 1)[-1]
        for generator in spec.get("secretGenerator", [])
        for source in (*generator.get("files", []), *generator.get("envs", []))
    ]


def git_ignored(path: Path) -> bool:
    """Whether git ignores path (and does not track it)."""
    result = subprocess.run(
        ["git", "check-ignore", "-q", str(path)], cwd=ROOT, capture_output=True, timeout=30
    )
    assert result.returncode in {0, 1}, f"git check-ignore failed: {result.stderr!r}"
    return result.returncode == 0


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=value lines (what a kustomize `envs` source and a compose .env hold)."""
    pairs = (line.split("=", 1) for line in text.splitlines() if line and line[0] != "#")
    return {key.strip(): value for key, value in pairs}


# Every key of the generated credentials (`switchboard secrets --k8s`) and the model settings.
SECRET_KEYS = set(parse_env_file(env_file(database_url=True))) | set(OPTIONAL_KEYS)
CREDENTIAL_NAME = re.compile(r"PASSWORD|TOKEN|SECRET|API_KEY|DATABASE_URL")


def is_credential(name: str) -> bool:
    return name in SECRET_KEYS or bool(CREDENTIAL_NAME.search(name))


def expected_secrets(service: Service) -> dict[str, str]:
    """env variable -> the Secret key it takes: the credentials a service needs and nothing else.

    Every service its own NATS password; the gRPC service token for whoever serves gRPC or calls
    another service's gRPC; the gateway token for whoever serves a public (HTTP API) port; the
    database URL for whoever needs PostgreSQL; model settings for the LLM loop; the chat
    channels' credentials for the gateway.
    """
    secrets = {"SB_NATS_PASSWORD": natsauth.password_variable(service.name)}
    if service.port("grpc") or service.calls:
        secrets["SB_SERVICE_TOKEN"] = "SB_SERVICE_TOKEN"
    if any(port.public for port in service.ports):
        secrets["SB_GATEWAY_TOKEN"] = "SB_GATEWAY_TOKEN"
    if "postgres" in service.needs:
        secrets["SB_DATABASE_URL"] = "SB_DATABASE_URL"
    if service.name in MODEL_USERS:
        secrets.update({key: key for key in MODEL_KEYS})
    if service.name in CHANNEL_USERS:
        secrets.update({key: key for key in CHANNEL_KEYS})
    if service.name in TRANSCRIPTION_USERS:
        secrets.update({key: key for key in TRANSCRIPTION_KEYS})
    return secrets


def secret_refs(container: Doc) -> dict[str, Doc]:
    """env variable -> its secretKeyRef, for a container's env taken from Secrets."""
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def literal_credentials(container: Doc) -> list[str]:
    """Credential-like env variables given a literal value (or taken from a ConfigMap)."""
    return [
        e["name"]
        for e in container.get("env", [])
        if is_credential(e["name"]) and "secretKeyRef" not in e.get("valueFrom", {})
    ]


# ${NAME}, ${NAME:-default}, ${NAME:?message}... and $NAME; `$$` is a literal dollar sign.
COMPOSE_VARIABLE = re.compile(r"\$(?:\{(?P<braced>\w+)(?P<modifier>[^}]*)\}|(?P<bare>\w+))")


def compose_variables(value: Any) -> list[tuple[str, str]]:
    """(name, modifier) of each variable a compose value interpolates, modifier "" for $NAME."""
    text = str(value).replace("$$", "")
    return [
        (m["braced"] or m["bare"], m["modifier"] or "") for m in COMPOSE_VARIABLE.finditer(text)
    ]


def compose_strings(node: Any) -> list[str]:
    """Every string (keys and values) of a loaded compose document."""
    if isinstance(node, dict):
        return [
            s
            for key, value in node.items()
            for s in (*compose_strings(key), *compose_strings(value))
        ]
    if isinstance(node, list):
        return [s for item in node for s in compose_strings(item)]
    return [node] if isinstance(node, str) else []


def compose_secrets(environment: Doc) -> dict[str, set[str]]:
    """env variable -> the secret variables its value comes from (its own name when passed
    through from the host environment with no value)."""
    secrets = {}
    for name, value in environment.items():
        sources = {name} if value is None else {v for v, _ in compose_variables(value)}
        if sources & SECRET_KEYS:
            secrets[name] = sources & SECRET_KEYS
    return secrets


def container_of(docs: list[Doc], kind: str, name: str) -> tuple[Doc, Doc]:
    """(pod spec, its one container) of a workload in a list of objects."""
    (workload,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    pod: Doc = workload["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def kustomize(copy: Path, kustomization: Path) -> str:
    """`kubectl kustomize` of a kustomization's directory, in the copy of k8s/."""
    return run_tool("kubectl", "kustomize", str(copy / kustomization.parent.relative_to(K8S)))
