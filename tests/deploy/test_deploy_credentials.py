"""Credentials in the deployment files (issue 9): no Secret with a literal value is checked in;
the dev overlay generates its Secret from an uncommitted secrets.env, so the kustomize builds run
on a copy of k8s/ with a fresh secrets.env from `switchboard secrets --k8s`. Each service gets
only the secrets it needs and its own NATS user; nats-server runs with the generated auth config.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from switchboard import natsauth
from switchboard.registry import Service

from .manifests import (
    ALL_INTERFACES,
    BASE,
    COMPOSE_FILE,
    COMPOSE_SOURCE,
    INFRASTRUCTURE,
    K8S,
    KUSTOMIZATIONS,
    NATS_AUTH_FILE,
    NATS_AUTH_MOUNT,
    OPTIONAL_KEYS,
    OVERLAYS,
    ROOT,
    SECRET,
    SERVICES,
    Doc,
    base_container,
    compose_secrets,
    compose_services,
    compose_strings,
    compose_variables,
    container_env,
    container_of,
    container_port,
    deployments,
    expected_secrets,
    git_ignored,
    is_credential,
    literal_credentials,
    load_doc,
    load_docs,
    mounted_volume,
    objects,
    parse_env_file,
    relative,
    secret_refs,
    secret_sources,
    service_id,
)

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


def with_included_overlays(kustomization: Path) -> list[Path]:
    """An overlay's kustomization and those of the overlays it builds on (overlays/dev-cluster
    is overlays/dev plus a component: the Secret is dev's)."""
    found = [kustomization]
    for entry in load_doc(kustomization).get("resources", []):
        included = (kustomization.parent / entry / "kustomization.yaml").resolve()
        if included.parent.parent == kustomization.parent.parent and included.is_file():
            found += with_included_overlays(included)
    return found


def test_built_secrets_are_generated_from_files(
    k8s_copy: Path, overlay: tuple[str, list[Doc]]
) -> None:
    """Every Secret of a built overlay is its secretGenerator's, holding its files' values."""
    name, built = overlay
    generators = {
        generator["name"]: [
            k8s_copy / kustomization.parent.relative_to(K8S) / source.split("=", 1)[-1]
            for source in generator.get("envs", [])
        ]
        for kustomization in with_included_overlays(OVERLAYS[name])
        for generator in load_doc(kustomization).get("secretGenerator", [])
    }
    secrets = [doc for doc in built if doc["kind"] == "Secret"]
    assert secrets, f"the {name} overlay generates no Secret"
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


def test_built_secret_and_config_references_resolve(overlay: tuple[str, list[Doc]]) -> None:
    """Every secretKeyRef of a built overlay names a Secret of the build (kustomize rewrote the
    generated name) and a key `switchboard secrets --k8s` writes, unless optional; every
    configMap volume names a ConfigMap of the build."""
    _, built = overlay
    secrets = {
        d["metadata"]["name"]: set(d.get("data", {})) for d in built if d["kind"] == "Secret"
    }
    config_maps = {d["metadata"]["name"] for d in built if d["kind"] == "ConfigMap"}
    problems = []
    for workload in built:
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
        optional = variable in OPTIONAL_KEYS  # a Secret without them still starts
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
