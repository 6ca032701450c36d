"""Offline checks of the deployment files: services/*/Dockerfile, docker-compose.yml and k8s/.

Schemas come vendored with check-jsonschema (the compose spec) and kubernetes-validate (the
Kubernetes OpenAPI, strict mode), so nothing here needs the network or a Docker daemon.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

Doc = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
COMPOSE_FILE = ROOT / "docker-compose.yml"
VENV_BIN = Path(sys.executable).parent  # not resolved: the venv's python may be a symlink
RUNTIME_UID = 10001
WORKSPACES = "/workspaces"
SERVICES = sorted(path.parent.name for path in ROOT.glob("services/*/Dockerfile"))
KUSTOMIZATIONS = sorted(K8S.rglob("kustomization.yaml"))
HARDENED = {
    "runAsNonRoot": True,
    "runAsUser": RUNTIME_UID,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
}


# --- helpers ---------------------------------------------------------------------------------


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


def exposed_ports(service: str) -> set[int]:
    instructions = dockerfile_instructions(ROOT / "services" / service / "Dockerfile")
    return {
        int(port.split("/")[0])
        for kw, args in instructions
        if kw == "EXPOSE"
        for port in args.split()
    }


def container_port(container: Doc, port: int | str) -> int:
    """Resolve a probe/annotation port (number or port name) to a declared container port."""
    ports = container.get("ports", [])
    by_name: dict[str, int] = {p["name"]: p["containerPort"] for p in ports if "name" in p}
    resolved = by_name.get(port, 0) if isinstance(port, str) else port
    assert resolved in {p["containerPort"] for p in ports}, f"{container['name']}: no port {port!r}"
    return resolved


def container_env(container: Doc) -> dict[str, Any]:
    """A container's literal env values (None for values taken from Secrets or ConfigMaps)."""
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def mounted_volume(pod: Doc, container: Doc, path: str) -> Doc:
    """The pod volume a container mounts at path ({} when nothing is mounted there)."""
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    return volumes.get(mounts.get(path, ""), {})


def health_port(environment: dict[str, Any]) -> int:
    """The port serving /healthz: the gateway's HTTP port, the ops port everywhere else."""
    port = environment.get("SB_HTTP_PORT") or environment.get("SB_OPS_PORT")
    assert port, "neither SB_HTTP_PORT nor SB_OPS_PORT is set"
    return int(port)


# --- (a) and (b): schemas --------------------------------------------------------------------


def test_compose_file_matches_the_compose_spec() -> None:
    run_tool("check-jsonschema", "--builtin-schema", "vendor.compose-spec", relative(COMPOSE_FILE))


def test_k8s_manifests_pass_strict_kubernetes_validation() -> None:
    manifests = manifest_files()
    assert manifests, "no manifests under k8s/"
    run_tool("kubernetes-validate", "--strict", "--quiet", *map(relative, manifests))


KUSTOMIZE = shutil.which("kustomize")
KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(not (KUSTOMIZE or KUBECTL), reason="neither kustomize nor kubectl installed")
@pytest.mark.parametrize(
    "kustomization",
    [k for k in KUSTOMIZATIONS if load_doc(k).get("kind", "Kustomization") == "Kustomization"],
    ids=relative,
)
def test_kustomize_build_passes_strict_validation(kustomization: Path, tmp_path: Path) -> None:
    directory = relative(kustomization.parent)
    command = (
        [KUSTOMIZE, "build", directory] if KUSTOMIZE else [str(KUBECTL), "kustomize", directory]
    )
    built = tmp_path / "built.yaml"
    built.write_text(run([str(part) for part in command]))
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
    for entry in kustomize_inputs(spec):
        if not (here / entry).is_file():
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


# --- (d): Dockerfiles, compose and k8s agree ----------------------------------------------------


def test_there_are_services_to_deploy() -> None:
    assert {"gateway", "router", "agent", "tools"} <= set(SERVICES)


@pytest.mark.parametrize("service", SERVICES)
def test_dockerfile_conventions(service: str) -> None:
    instructions = dockerfile_instructions(ROOT / "services" / service / "Dockerfile")
    first_from = next(i for i, (kw, _) in enumerate(instructions) if kw == "FROM")
    args_before_from = [args.split("=")[0] for kw, args in instructions[:first_from] if kw == "ARG"]
    assert "BASE_IMAGE" in args_before_from, "declare ARG BASE_IMAGE before the first FROM"
    assert instructions[first_from][1] == "${BASE_IMAGE}"

    assert not [args for kw, args in instructions if kw == "ADD"], "use COPY, not ADD"
    allowed_sources = {"requirements.txt", "libs/switchboard", f"services/{service}"}
    for kw, args in instructions:
        if kw == "COPY":
            sources = [part for part in args.split()[:-1] if not part.startswith("--")]
            assert set(sources) <= allowed_sources, f"COPY {args}: copies more than it needs"
        if kw == "RUN" and "pip install" in args:
            assert "--no-cache-dir" in args, f"RUN {args}: pip without --no-cache-dir"

    env = " ".join(args for kw, args in instructions if kw == "ENV")
    assert "PYTHONUNBUFFERED=1" in env
    users = [args for kw, args in instructions if kw == "USER"]
    assert users and users[-1].split(":")[0] == str(RUNTIME_UID), "run as the numeric user 10001"
    assert exposed_ports(service), "EXPOSE the service's ports"
    (cmd,) = [args for kw, args in instructions if kw == "CMD"]
    assert json.loads(cmd) == ["python", "-m", f"switchboard_{service}"]


@pytest.mark.parametrize("service", SERVICES)
def test_service_has_compose_and_k8s_definitions(service: str) -> None:
    compose = compose_services().get(service)
    assert compose, f"docker-compose.yml has no service {service!r}"
    assert compose["build"] == {"context": ".", "dockerfile": f"services/{service}/Dockerfile"}

    manifest = K8S / "base" / f"{service}.yaml"
    assert manifest.is_file(), f"missing {relative(manifest)}"
    for kind in ("Deployment", "Service", "ServiceAccount"):
        assert service in objects(manifest, kind), f"{relative(manifest)} lacks {kind} {service}"
    assert objects(manifest, "ServiceAccount")[service]["automountServiceAccountToken"] is False
    pod = objects(manifest, "Deployment")[service]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == service
    assert pod.get("automountServiceAccountToken") is not True

    (container,) = pod["containers"]
    assert {p["containerPort"] for p in container["ports"]} == exposed_ports(service)
    assert container_env(container)["OTEL_SERVICE_NAME"] == service
    assert compose["environment"]["OTEL_SERVICE_NAME"] == service


@pytest.mark.parametrize("service", SERVICES)
def test_health_checks_hit_the_configured_port(service: str) -> None:
    compose = compose_services()[service]
    port = health_port(compose["environment"])
    assert port in exposed_ports(service)
    assert f"127.0.0.1:{port}/healthz" in " ".join(compose["healthcheck"]["test"])

    deployment = objects(K8S / "base" / f"{service}.yaml", "Deployment")[service]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert health_port(container_env(container)) == port
    assert container_port(container, container["livenessProbe"]["httpGet"]["port"]) == port


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
