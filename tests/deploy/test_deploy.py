"""Offline checks of the deployment files: the Dockerfile, docker-compose.yml and k8s/, against
the registry of services (libs/switchboard/switchboard/registry.py) and against their schemas.

Schemas come vendored with check-jsonschema (the compose spec) and kubernetes-validate (the
Kubernetes OpenAPI, strict mode), and kubectl (for `kubectl kustomize`) is a wheel of
requirements-dev.txt, so nothing here needs the network, a cluster or a Docker daemon.

Credentials (issue 9): no Secret with a literal value is checked in; the dev overlay generates its
Secret from an uncommitted secrets.env, so the kustomize builds run on a copy of k8s/ with a fresh
secrets.env from `switchboard secrets --k8s`. Each service gets only the secrets it needs and its
own NATS user; nats-server runs with the generated auth config.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import tomllib
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
BASE_SHARED = {"config.yaml"}  # the base's files that belong to no single service
KUSTOMIZATIONS = sorted(K8S.rglob("kustomization.yaml"))
SECRET = "switchboard-secrets"  # the one Secret the base references; overlays provide it
DEV_OVERLAY = K8S / "overlays" / "dev"
NATS_AUTH_FILE = ROOT / natsauth.DEPLOY_CONFIG
NATS_AUTH_MOUNT = "/etc/nats/auth.conf"
ALL_INTERFACES = "0.0.0.0"
# Model provider settings: optional keys of the Secret, for the service running the LLM loop only.
MODEL_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "SB_MODEL")
MODEL_USERS = {"agent"}
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
SECRET_KEYS = set(parse_env_file(env_file(database_url=True))) | set(MODEL_KEYS)
CREDENTIAL_NAME = re.compile(r"PASSWORD|TOKEN|SECRET|API_KEY|DATABASE_URL")


def is_credential(name: str) -> bool:
    return name in SECRET_KEYS or bool(CREDENTIAL_NAME.search(name))


def expected_secrets(service: Service) -> dict[str, str]:
    """env variable -> the Secret key it takes: the credentials a service needs and nothing else.

    Every service its own NATS password; the gRPC service token for whoever serves gRPC or calls
    another service's gRPC; the gateway token for whoever serves a public (HTTP API) port; the
    database URL for whoever needs PostgreSQL; model settings for the LLM loop.
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


@pytest.fixture(scope="module")
def k8s_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """k8s/ copied with a fresh secrets.env for every secretGenerator (as `switchboard secrets
    --k8s` writes it), so that kustomize builds without a secrets.env in the repository."""
    copy = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, copy, ignore=shutil.ignore_patterns("secrets.env"))
    for kustomization in KUSTOMIZATIONS:
        for source in secret_sources(load_doc(kustomization)):
            target = copy / kustomization.parent.relative_to(K8S) / source
            target.write_text(env_file(database_url=True))
            target.chmod(0o600)
    return copy


def kustomize(copy: Path, kustomization: Path) -> str:
    """`kubectl kustomize` of a kustomization's directory, in the copy of k8s/."""
    return run_tool("kubectl", "kustomize", str(copy / kustomization.parent.relative_to(K8S)))


@pytest.fixture(scope="module")
def dev_build(k8s_copy: Path) -> list[Doc]:
    """The objects of the built dev overlay."""
    built = kustomize(k8s_copy, DEV_OVERLAY / "kustomization.yaml")
    return [doc for doc in YAML(typ="safe").load_all(built) if doc is not None]


# --- (a) and (b): schemas --------------------------------------------------------------------


def test_compose_file_matches_the_compose_spec() -> None:
    run_tool("check-jsonschema", "--builtin-schema", "vendor.compose-spec", relative(COMPOSE_FILE))


def test_k8s_manifests_pass_strict_kubernetes_validation() -> None:
    manifests = manifest_files()
    assert manifests, "no manifests under k8s/"
    run_tool("kubernetes-validate", "--strict", "--quiet", *map(relative, manifests))


@pytest.mark.parametrize(
    "kustomization",
    [k for k in KUSTOMIZATIONS if load_doc(k).get("kind", "Kustomization") == "Kustomization"],
    ids=relative,
)
def test_kustomize_build_passes_strict_validation(
    kustomization: Path, k8s_copy: Path, tmp_path: Path
) -> None:
    built = tmp_path / "built.yaml"
    built.write_text(kustomize(k8s_copy, kustomization))
    run_tool("kubernetes-validate", "--strict", "--quiet", str(built))


# --- (c): kustomizations list exactly their files ---------------------------------------------


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS, ids=relative)
def test_kustomization_lists_exactly_its_files(kustomization: Path) -> None:
    here = kustomization.parent
    spec = load_doc(kustomization)
    entries = kustomize_entries(spec)
    problems = [f"{entry}: listed twice" for entry in set(entries) if entries.count(entry) > 1]

    expected_kinds = {"resources": "Kustomization", "components": "Component"}
    for field, expected_kind in expected_kinds.items():
        for entry in spec.get(field, []):
            target = here / entry
            if target.is_dir():
                nested = target / "kustomization.yaml"
                kind = load_doc(nested).get("kind", "Kustomization") if nested.is_file() else None
                if kind != expected_kind:
                    problems.append(f"{entry}: {field} entry must be a {expected_kind} directory")
            elif not target.is_file():
                problems.append(f"{entry}: does not exist")
    secret_files = secret_sources(spec)  # generated where deployed, never checked in
    for entry in kustomize_inputs(spec):
        if entry in secret_files:
            if not git_ignored(here / entry):
                problems.append(f"{entry}: a secretGenerator source, add it to .gitignore")
        elif not (here / entry).is_file():
            problems.append(f"{entry}: does not exist")

    listed = {(here / entry).resolve() for entry in [*entries, *kustomize_inputs(spec)]}
    problems += [
        f"{path.name}: not listed"
        for path in yaml_files(here)
        if path.name != "kustomization.yaml" and path.resolve() not in listed
    ]
    assert not problems, f"{relative(kustomization)}:\n" + "\n".join(problems)


def test_every_manifest_belongs_to_a_kustomization() -> None:
    orphans = [
        relative(p) for p in manifest_files() if not (p.parent / "kustomization.yaml").exists()
    ]
    assert not orphans


def test_dev_overlay_uses_base_and_dev_dependencies() -> None:
    spec = load_doc(K8S / "overlays" / "dev" / "kustomization.yaml")
    assert "../../base" in spec.get("resources", [])
    assert "../../components/dev-dependencies" in spec.get("components", [])


# --- (d): the registry, the Dockerfile, compose and k8s agree -----------------------------------


def test_there_are_services_to_deploy() -> None:
    assert {"gateway", "router", "agent", "tools"} <= set(registry.names())


def test_dockerfile_conventions() -> None:
    assert not sorted(ROOT.glob("services/*/Dockerfile")), "one Dockerfile at the root for all"
    instructions = dockerfile_instructions(DOCKERFILE)
    first_from = next(i for i, (kw, _) in enumerate(instructions) if kw == "FROM")
    args_before_from = [args.split("=")[0] for kw, args in instructions[:first_from] if kw == "ARG"]
    assert "BASE_IMAGE" in args_before_from, "declare ARG BASE_IMAGE before the first FROM"
    assert instructions[first_from][1] == "${BASE_IMAGE}"
    args_after_from = [args.split("=")[0] for kw, args in instructions[first_from:] if kw == "ARG"]
    assert "SERVICE" in args_after_from, "declare ARG SERVICE after FROM (the build selects it)"

    assert not [args for kw, args in instructions if kw == "ADD"], "use COPY, not ADD"
    allowed_sources = {"requirements.txt", "libs/switchboard", "services/${SERVICE}"}
    for kw, args in instructions:
        if kw == "COPY":
            sources = [part for part in args.split()[:-1] if not part.startswith("--")]
            assert set(sources) <= allowed_sources, f"COPY {args}: copies more than it needs"
        if kw == "RUN" and "pip install" in args:
            assert "--no-cache-dir" in args, f"RUN {args}: pip without --no-cache-dir"
        for service in SERVICES:
            for name in (service.package_dir, service.module):
                assert name not in args, f"{kw} {args}: names {service.name}; use ${{SERVICE}}"
    runs = " ".join(args for kw, args in instructions if kw == "RUN")
    assert "./services/${SERVICE}" in runs, "install the selected service"
    assert "pip check" in runs

    env = " ".join(args for kw, args in instructions if kw == "ENV")
    assert "PYTHONUNBUFFERED=1" in env
    assert "SB_SERVICE=${SERVICE}" in env, "switchboard serve runs the service named by SB_SERVICE"
    assert f"mkdir {WORKSPACES}" in runs, f"create {WORKSPACES} in every image"
    assert f"chown {RUNTIME_UID}:{RUNTIME_UID} {WORKSPACES}" in runs, "owned by the runtime user"
    users = [args for kw, args in instructions if kw == "USER"]
    assert users and users[-1].split(":")[0] == str(RUNTIME_UID), "run as the numeric user 10001"
    (cmd,) = [args for kw, args in instructions if kw == "CMD"]
    assert json.loads(cmd) == ["switchboard", "serve"]


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_compose_service_matches_the_registry(service: Service) -> None:
    compose = compose_services().get(service.name)
    assert compose, f"docker-compose.yml has no service {service.name!r}"
    assert compose["build"] == {
        "context": ".",
        "dockerfile": "Dockerfile",
        "args": {"SERVICE": service.name},
    }
    assert image_repository(compose["image"]) == f"switchboard/{service.name}"
    environment = compose["environment"]
    assert environment.get("OTEL_SERVICE_NAME") == service.otel_name
    for port in service.ports:
        value = environment.get(port.setting)
        assert str(value) == str(port.number), f"{service.name}: {port.setting}"

    published = {
        int(p["target"]) if isinstance(p, dict) else int(p.rsplit(":", 1)[-1].split("/")[0])
        for p in compose.get("ports", [])
    }
    assert published == {p.number for p in service.ports if p.public}, "publish the public ports"

    if service.scaled:
        assert "replicas" in compose.get("deploy", {}), f"{service.name}: scaled, no replicas"
    else:
        assert "deploy" not in compose, f"{service.name}: not scaled, yet deploy is set"


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_k8s_service_matches_the_registry(service: Service) -> None:
    manifest = BASE / f"{service.name}.yaml"
    assert manifest.is_file(), f"missing {relative(manifest)}"
    for kind in ("Deployment", "Service", "ServiceAccount"):
        assert service.name in objects(manifest, kind), f"{relative(manifest)} lacks {kind}"
    account = objects(manifest, "ServiceAccount")[service.name]
    assert account["automountServiceAccountToken"] is False
    pod = base_pod(service)
    assert pod["serviceAccountName"] == service.name
    assert pod.get("automountServiceAccountToken") is not True

    expected = {(p.name, p.number) for p in service.ports}
    container = base_container(service)
    assert image_repository(container["image"]) == f"switchboard/{service.name}"
    assert {(p["name"], p["containerPort"]) for p in container["ports"]} == expected
    k8s_service = objects(manifest, "Service")[service.name]
    ports = k8s_service["spec"]["ports"]
    assert {(p["name"], p["port"]) for p in ports} == expected
    assert all(p["targetPort"] == p["name"] for p in ports), "target the container ports by name"

    environment = container_env(container)
    assert environment.get("OTEL_SERVICE_NAME") == service.otel_name
    for port in service.ports:
        assert environment.get(port.setting) == str(port.number), f"{service.name}: {port.setting}"


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_health_checks_hit_the_health_port(service: Service) -> None:
    port = service.health_port.number
    compose = compose_services()[service.name]
    assert f"127.0.0.1:{port}/healthz" in " ".join(compose["healthcheck"]["test"])

    container = base_container(service)
    for probe in ("livenessProbe", "readinessProbe"):
        assert container_port(container, container[probe]["httpGet"]["port"]) == port, probe
    grpc = container.get("startupProbe", {}).get("grpc")
    if grpc:
        grpc_port = service.port("grpc")
        assert grpc_port and grpc["port"] == grpc_port.number, "gRPC probe on the gRPC port"
    annotations = base_template(service)["metadata"]["annotations"]
    metrics = (service.port("ops") or service.health_port).number
    assert int(annotations["prometheus.io/port"]) == metrics, "/metrics: the ops port, else health"


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_dependencies_and_callee_addresses_match_the_registry(service: Service) -> None:
    compose = compose_services()[service.name]
    depends_on = set(compose.get("depends_on", {}))
    assert depends_on == {*service.needs, *service.calls}, f"{service.name}: needs and calls"

    environments = {
        "docker-compose.yml": compose["environment"],
        relative(BASE / f"{service.name}.yaml"): container_env(base_container(service)),
    }
    for callee in map(registry.get, service.calls):
        grpc = callee.port("grpc")
        assert grpc, f"{service.name} calls {callee.name}, which serves no gRPC"
        for where, environment in environments.items():
            address = environment.get(callee.addr_setting)
            assert address == f"{callee.name}:{grpc.number}", f"{where}: {callee.addr_setting}"


def test_base_kustomization_lists_every_service() -> None:
    resources = load_doc(BASE / "kustomization.yaml").get("resources", [])
    missing = [f"{s.name}.yaml" for s in SERVICES if f"{s.name}.yaml" not in resources]
    assert not missing, f"k8s/base/kustomization.yaml does not list {missing}"


def test_nothing_is_deployed_that_the_registry_does_not_know() -> None:
    known = set(registry.names())
    unknown_compose = set(compose_services()) - known - INFRASTRUCTURE
    assert not unknown_compose, f"compose services not in the registry: {unknown_compose}"

    base_files = {p.name for p in yaml_files(BASE)} - {"kustomization.yaml"} - BASE_SHARED
    unknown_files = {name for name in base_files if Path(name).stem not in known}
    assert not unknown_files, f"k8s/base files of no registry service: {unknown_files}"

    unknown_deployments = [
        f"{relative(path)}:{name}"
        for path in manifest_files()
        for name in objects(path, "Deployment")
        if name not in known | INFRASTRUCTURE
    ]
    assert not unknown_deployments, f"Deployments not in the registry: {unknown_deployments}"


def test_pyproject_knows_every_service() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    first_party = pyproject["tool"]["ruff"]["lint"]["isort"]["known-first-party"]
    missing = [s.module for s in SERVICES if s.module not in first_party]
    assert not missing, f"[tool.ruff.lint.isort] known-first-party lacks {missing}"
    mypy_path = pyproject["tool"]["mypy"]["mypy_path"]
    missing = [s.package_dir for s in SERVICES if s.package_dir not in mypy_path]
    assert not missing, f"[tool.mypy] mypy_path lacks {missing}"


def test_compose_services_start_after_healthy_dependencies() -> None:
    services = compose_services()
    for name, service in services.items():
        assert "healthcheck" in service, f"{name}: no healthcheck"
        depends_on = service.get("depends_on", {})
        assert isinstance(depends_on, dict), f"{name}: depends_on needs conditions"
        for dependency, options in depends_on.items():
            assert dependency in services, f"{name}: depends on unknown {dependency}"
            assert options.get("condition") == "service_healthy", f"{name} -> {dependency}"


def test_tool_workspaces_are_writable_volumes() -> None:
    compose = compose_services()["tools"]
    assert compose["environment"]["SB_WORKSPACES_DIR"] == WORKSPACES
    targets = [v["target"] if isinstance(v, dict) else v.split(":")[1] for v in compose["volumes"]]
    assert WORKSPACES in targets, "compose: tools needs a volume at /workspaces"

    pod = objects(K8S / "base" / "tools.yaml", "Deployment")["tools"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container_env(container)["SB_WORKSPACES_DIR"] == WORKSPACES
    assert "emptyDir" in mounted_volume(pod, container, WORKSPACES), "k8s: no emptyDir workspaces"


@pytest.mark.parametrize("deployment", deployments())
def test_deployment_is_hardened_and_probed(deployment: Doc) -> None:
    where = deployment["metadata"]["name"]
    template = deployment["spec"]["template"]
    pod = template["spec"]
    for container in pod["containers"]:
        name = f"{where}/{container['name']}"
        # Container settings override the pod's; the effective context is what counts.
        context = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
        wrong = {key: context.get(key) for key in HARDENED if context.get(key) != HARDENED[key]}
        assert not wrong, f"{name}: securityContext must have {HARDENED}, has {wrong}"
        assert "ALL" in context.get("capabilities", {}).get("drop", []), f"{name}: drop ALL"
        assert context.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        assert "emptyDir" in mounted_volume(pod, container, "/tmp"), f"{name}: no emptyDir /tmp"

        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            http = container.get(probe, {}).get("httpGet", {})
            assert http.get("path") == path, f"{name}: {probe} must GET {path}"
            container_port(container, http["port"])

        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container.get("resources", {}).get(bound, {})), name

    annotations = template["metadata"].get("annotations", {})
    assert annotations.get("prometheus.io/scrape") == "true", where
    assert annotations.get("prometheus.io/path") == "/metrics", where
    declared = {p["containerPort"] for c in pod["containers"] for p in c.get("ports", [])}
    assert int(annotations["prometheus.io/port"]) in declared, f"{where}: scrape port not declared"


# --- (e): credentials -------------------------------------------------------------------------


def test_no_secret_literal_is_checked_in() -> None:
    """No Secret with data under k8s/ and no secretGenerator literals: Secrets are generated
    from files that are not checked in (or come from outside, e.g. External Secrets)."""
    problems = [
        f"{relative(path)}: Secret {doc['metadata']['name']} has {field}"
        for path in sorted(K8S.rglob("*.y*ml"))
        for doc in load_docs(path)
        if doc.get("kind") == "Secret"
        for field in ("data", "stringData")
        if doc.get(field)
    ]
    for kustomization in KUSTOMIZATIONS:
        spec = load_doc(kustomization)
        for generator in spec.get("secretGenerator", []):
            if generator.get("literals"):
                problems.append(f"{relative(kustomization)}: {generator['name']} has literals")
        for source in secret_sources(spec):
            if not git_ignored(kustomization.parent / source):
                problems.append(f"{relative(kustomization)}: {source} is not git-ignored")
    assert not problems, "\n".join(problems)


def test_base_references_the_secret_it_does_not_define() -> None:
    assert not any(doc.get("kind") == "Secret" for doc in load_docs(BASE / "config.yaml"))
    for service in SERVICES:
        names = {ref["name"] for ref in secret_refs(base_container(service)).values()}
        assert names <= {SECRET}, f"{service.name}: secrets other than {SECRET}: {names}"


def test_built_secrets_are_generated_from_files(k8s_copy: Path, dev_build: list[Doc]) -> None:
    """Every Secret of the built overlay is a secretGenerator's, holding its files' values."""
    generators = {
        generator["name"]: [
            k8s_copy / kustomization.parent.relative_to(K8S) / source.split("=", 1)[-1]
            for source in generator.get("envs", [])
        ]
        for kustomization in KUSTOMIZATIONS
        for generator in load_doc(kustomization).get("secretGenerator", [])
    }
    secrets = [doc for doc in dev_build if doc["kind"] == "Secret"]
    assert secrets, "the dev overlay generates no Secret"
    for secret in secrets:
        name = secret["metadata"]["name"]
        generator = name if name in generators else name.rsplit("-", 1)[0]
        assert generator in generators, f"Secret {name}: not from a secretGenerator"
        assert not secret.get("stringData"), f"Secret {name}: stringData"
        expected: dict[str, str] = {}
        for env in generators[generator]:
            expected |= parse_env_file(env.read_text())
        data = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
        assert data == expected, f"Secret {name}: not the values of its env files"


def test_built_secret_and_config_references_resolve(dev_build: list[Doc]) -> None:
    """Every secretKeyRef of the built overlay names a Secret of the build (kustomize rewrote the
    generated name) and a key `switchboard secrets --k8s` writes, unless optional; every
    configMap volume names a ConfigMap of the build."""
    secrets = {
        d["metadata"]["name"]: set(d.get("data", {})) for d in dev_build if d["kind"] == "Secret"
    }
    config_maps = {d["metadata"]["name"] for d in dev_build if d["kind"] == "ConfigMap"}
    problems = []
    for workload in dev_build:
        if workload["kind"] not in {"Deployment", "StatefulSet"}:
            continue
        pod = workload["spec"]["template"]["spec"]
        for container in pod["containers"]:
            where = f"{workload['metadata']['name']}/{container['name']}"
            for variable, ref in secret_refs(container).items():
                if ref["name"] not in secrets:
                    problems.append(f"{where}: {variable} from unknown Secret {ref['name']}")
                elif ref["key"] not in secrets[ref["name"]] and not ref.get("optional"):
                    problems.append(f"{where}: {variable}: no key {ref['key']} in the Secret")
        for volume in pod.get("volumes", []):
            if "configMap" in volume and volume["configMap"]["name"] not in config_maps:
                problems.append(f"{workload['metadata']['name']}: unknown {volume['configMap']}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("deployment", deployments())
def test_deployment_connects_as_its_own_nats_user(deployment: Doc) -> None:
    name = deployment["metadata"]["name"]
    if name in INFRASTRUCTURE:
        pytest.skip(f"{name} is not a Switchboard service")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container_env(container).get("SB_NATS_USER") == name, "SB_NATS_USER: the service"
    assert name in natsauth.users() and name != natsauth.ADMIN
    password = secret_refs(container).get("SB_NATS_PASSWORD", {})
    expected = {"name": SECRET, "key": natsauth.password_variable(name)}
    assert password == expected, f"{name}: SB_NATS_PASSWORD must come from {expected}"


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_k8s_service_takes_only_its_secrets(service: Service) -> None:
    container = base_container(service)
    refs = secret_refs(container)
    assert {variable: ref["key"] for variable, ref in refs.items()} == expected_secrets(service)
    for variable, ref in refs.items():
        assert ref["name"] == SECRET, f"{variable}: from {ref['name']}"
        optional = variable in MODEL_KEYS  # a Secret without model settings still starts
        assert ref.get("optional", False) is optional, f"{variable}: optional must be {optional}"
    assert not literal_credentials(container), "credentials must come from the Secret"
    env_from = [source for source in container.get("envFrom", []) if "secretRef" in source]
    assert not env_from, "envFrom a Secret hands over every key"


def test_k8s_dependencies_take_only_their_secrets(dev_build: list[Doc]) -> None:
    expected = {
        "nats": set(natsauth.Credentials.generate().server_env()),
        "postgres": {"POSTGRES_PASSWORD"},
    }
    for name, keys in expected.items():
        _, container = container_of(dev_build, "StatefulSet", name)
        refs = secret_refs(container)
        assert {variable: ref["key"] for variable, ref in refs.items()} == {k: k for k in keys}
        assert not literal_credentials(container), f"{name}: a literal credential"


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_compose_service_takes_only_its_secrets(service: Service) -> None:
    environment = compose_services()[service.name]["environment"]
    assert environment.get("SB_NATS_USER") == service.name, "SB_NATS_USER: the service"
    expected = {
        variable: {COMPOSE_SOURCE.get(key, key)}
        for variable, key in expected_secrets(service).items()
    }
    assert compose_secrets(environment) == expected
    literal = [
        name
        for name, value in environment.items()
        if is_credential(name) and value is not None and not compose_variables(value)
    ]
    assert not literal, f"literal credentials: {literal}"


def test_compose_dependencies_take_only_their_secrets() -> None:
    services = compose_services()
    nats = {variable: {variable} for variable in natsauth.Credentials.generate().server_env()}
    assert compose_secrets(services["nats"].get("environment", {})) == nats
    postgres = services["postgres"]["environment"]
    assert compose_secrets(postgres) == {"POSTGRES_PASSWORD": {"POSTGRES_PASSWORD"}}


def test_compose_credentials_have_no_defaults() -> None:
    """A credential variable is `${NAME:?message}`: compose refuses to start without it, and
    nobody can log in with a default everyone knows."""
    problems = [
        f"{string!r}: use ${{{name}:?message}}"
        for string in compose_strings(load_doc(COMPOSE_FILE))
        for name, modifier in compose_variables(string)
        if is_credential(name) and not re.fullmatch(r":\?.+", modifier)
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_listeners_are_reachable_in_containers(service: Service) -> None:
    """Ports bind loopback by default; in a container the probes, Prometheus and callers need
    them on every interface (a public port's default already is)."""
    config = objects(BASE / "config.yaml", "ConfigMap")["switchboard-config"]["data"]
    environments = {
        "docker-compose.yml": compose_services()[service.name]["environment"],
        "k8s": {**config, **container_env(base_container(service))},
    }
    for port in service.ports:
        if port.public:
            continue
        for where, environment in environments.items():
            assert environment.get(port.host_setting) == ALL_INTERFACES, f"{where}: {port.setting}"


def test_nats_auth_config_is_generated() -> None:
    assert NATS_AUTH_FILE.read_text() == natsauth.server_config(), (
        f"{relative(NATS_AUTH_FILE)} is stale: run `make nats-auth`"
    )


def nats_args(arguments: list[str]) -> dict[str, str]:
    """nats-server's options with a value (-c, -sd, -m...)."""
    pairs = zip(arguments, [*arguments[1:], ""], strict=True)
    return {flag: value for flag, value in pairs if flag.startswith("-") and value[:1] != "-"}


def test_compose_nats_runs_with_the_auth_config() -> None:
    nats = compose_services()["nats"]
    options = nats_args(nats["command"])
    assert options.get("-c") == NATS_AUTH_MOUNT, "start nats-server with -c the auth config"
    assert options.get("-m") == "8222", "the monitoring port of the health check"
    mounts = {}
    for volume in nats["volumes"]:
        source, target, *mode = volume.split(":")
        mounts[target] = (source, mode)
    source, mode = mounts.get(NATS_AUTH_MOUNT, ("", []))
    assert source.startswith("./") and (ROOT / source).resolve() == NATS_AUTH_FILE
    assert mode == ["ro"], "mount the auth config read-only"


def test_k8s_nats_runs_with_the_auth_config(dev_build: list[Doc]) -> None:
    pod, container = container_of(dev_build, "StatefulSet", "nats")
    options = nats_args(container["args"])
    assert options.get("-c") == NATS_AUTH_MOUNT, "start nats-server with -c the auth config"
    mounts = [m for m in container["volumeMounts"] if m["mountPath"] == NATS_AUTH_MOUNT]
    assert len(mounts) == 1 and "subPath" in mounts[0], f"mount auth.conf at {NATS_AUTH_MOUNT}"
    (mount,) = mounts
    assert mount.get("readOnly") is True, "mount the auth config read-only"
    volume = mounted_volume(pod, container, NATS_AUTH_MOUNT)
    assert "configMap" in volume, "the auth config comes from a ConfigMap"
    (config_map,) = [
        d
        for d in dev_build
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == volume["configMap"]["name"]
    ]
    text = config_map["data"][mount["subPath"]]
    assert text == natsauth.server_config(), f"not the text of {relative(NATS_AUTH_FILE)}"

    # Monitoring stays outside authorization: the probes keep working without credentials.
    monitor = int(options["-m"])
    for probe in ("livenessProbe", "readinessProbe"):
        http = container[probe]["httpGet"]
        assert http["path"].startswith("/healthz"), probe
        assert container_port(container, http["port"]) == monitor, probe
