"""Offline checks of Compose's observability stack and shared volumes against the registry:
Prometheus scrapes every service's ops port (and nothing else), the services' traces go to the
collector and on to the trace backend, Grafana is provisioned from files that exist, every
file Compose mounts exists, the workspaces volume is shared at one path, and .env.example
documents every variable Compose requires. Nothing here runs a container (see docs/compose.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from switchboard.cli.secrets_env import env_file

from .debian_tools import prometheus_tool
from .manifests import (
    COMPOSE_FILE,
    NO_HEALTHCHECK,
    OBSERVABILITY,
    ROOT,
    SERVICES,
    WORKSPACES,
    Doc,
    compose_services,
    compose_strings,
    compose_variables,
    load_doc,
    parse_env_file,
    service_id,
)

DEPLOY = ROOT / "deploy"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
COLLECTOR_CONFIG = DEPLOY / "otel-collector.yaml"
GRAFANA = DEPLOY / "grafana"
WORKSPACE_USERS = {"agent", "tools", "scheduler"}  # whose settings have SB_WORKSPACES_DIR


def bind_mounts(service: Doc) -> dict[str, Path]:
    """container path -> host path of a compose service's bind mounts (./... sources)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = (
            (volume["source"], volume["target"])
            if isinstance(volume, dict)
            else volume.split(":")[:2]
        )
        if source.startswith((".", "/")):
            mounts[target] = (ROOT / source).resolve()
    return mounts


def named_volumes(service: Doc) -> dict[str, str]:
    """container path -> named volume of a compose service."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = (
            (volume["source"], volume["target"])
            if isinstance(volume, dict)
            else volume.split(":")[:2]
        )
        if not source.startswith((".", "/")):
            mounts[target] = source
    return mounts


def mounted(service: str, host: Path) -> str:
    """Where compose service ``service`` sees ``host`` (a bind-mounted file or directory)."""
    targets = [t for t, s in bind_mounts(compose_services()[service]).items() if s == host]
    assert targets, f"{service} does not mount {host.relative_to(ROOT)}"
    return targets[0]


def host_port(address: str) -> tuple[str, int]:
    parts = urlsplit(address if "//" in address else f"//{address}")
    assert parts.hostname and parts.port, address
    return parts.hostname, parts.port


def scrape_targets(config: Doc) -> dict[str, tuple[str, int]]:
    """`service` label -> (compose host, port) of each scrape job (static or DNS)."""
    targets: dict[str, tuple[str, int]] = {}
    for job in config["scrape_configs"]:
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                targets[static["labels"]["service"]] = host_port(target)
        for dns in job.get("dns_sd_configs", []):
            (relabel,) = [r for r in job["relabel_configs"] if r["target_label"] == "service"]
            for name in dns["names"]:
                targets[relabel["replacement"]] = (name, dns["port"])
    return targets


def test_the_observability_stack_is_in_compose() -> None:
    assert set(compose_services()) >= OBSERVABILITY


def test_every_file_compose_mounts_exists() -> None:
    problems = [
        f"{name}: {host.relative_to(ROOT)} does not exist"
        for name, service in compose_services().items()
        for host in bind_mounts(service).values()
        if not host.exists()
    ]
    assert not problems, "\n".join(problems)


def test_the_prometheus_config_is_valid_and_loads_the_alert_rules() -> None:
    done = subprocess.run(
        [prometheus_tool("promtool"), "check", "config", PROMETHEUS_CONFIG.name],
        cwd=PROMETHEUS_CONFIG.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "alerts.yml" in done.stdout  # the rule file was found and checked
    # In the container, the rule file sits next to the config, as it does here.
    config_dir = Path(mounted("prometheus", PROMETHEUS_CONFIG)).parent
    (rules,) = load_doc(PROMETHEUS_CONFIG)["rule_files"]
    assert mounted("prometheus", DEPLOY / "prometheus" / rules) == str(config_dir / rules)


def test_prometheus_scrapes_every_service_on_its_ops_port() -> None:
    targets = scrape_targets(load_doc(PROMETHEUS_CONFIG))
    expected = {}
    for service in SERVICES:
        ops = service.port("ops") or service.health_port
        expected[service.name] = (service.name, ops.number)
        environment = compose_services()[service.name]["environment"]
        assert environment.get(ops.setting) == str(ops.number), f"{service.name}: {ops.setting}"
    assert targets == expected


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_scaled_services_are_scraped_replica_by_replica(service: Any) -> None:
    """A service with replicas is found through DNS (one target per replica), not as one
    address that would scrape a random replica each time."""
    jobs = load_doc(PROMETHEUS_CONFIG)["scrape_configs"]
    (job,) = [
        j
        for j in jobs
        if any(service.name in d["names"] for d in j.get("dns_sd_configs", []))
        or any(s["labels"]["service"] == service.name for s in j.get("static_configs", []))
    ]
    replicated = "replicas" in compose_services()[service.name].get("deploy", {})
    assert bool(job.get("dns_sd_configs")) == replicated, job["job_name"]


def test_every_service_sends_its_traces_to_the_collector() -> None:
    services = compose_services()
    endpoints = {
        s.name: services[s.name]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] for s in SERVICES
    }
    assert len(set(endpoints.values())) == 1, endpoints  # every service's OTEL_* the same
    (endpoint,) = set(endpoints.values())
    (variable, modifier) = compose_variables(endpoint)[0]
    assert variable == "OTEL_EXPORTER_OTLP_ENDPOINT" and modifier.startswith(":-")
    host, port = host_port(modifier.removeprefix(":-"))
    assert host == "otel-collector" and host in services
    collector = load_doc(COLLECTOR_CONFIG)
    grpc = collector["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert host_port(grpc) == ("0.0.0.0", port), "the collector's OTLP gRPC port"
    assert mounted("otel-collector", COLLECTOR_CONFIG) in " ".join(
        services["otel-collector"]["command"]
    )


def test_the_collector_hands_traces_to_the_trace_backend() -> None:
    collector = load_doc(COLLECTOR_CONFIG)
    pipeline = collector["service"]["pipelines"]["traces"]
    assert pipeline["receivers"] == ["otlp"]
    (exporter,) = pipeline["exporters"]
    host, _ = host_port(collector["exporters"][exporter]["endpoint"])
    assert host in compose_services(), f"{exporter}: {host} is not a compose service"
    assert set(pipeline["processors"]) <= set(collector["processors"])
    assert set(collector["service"]["extensions"]) <= set(collector["extensions"])


def test_grafana_is_provisioned_from_the_repository() -> None:
    services = compose_services()
    provisioning = Path(mounted("grafana", GRAFANA / "provisioning"))
    assert provisioning == Path("/etc/grafana/provisioning")
    (datasources,) = (GRAFANA / "provisioning" / "datasources").glob("*.yaml")
    by_uid = {d["uid"]: d for d in load_doc(datasources)["datasources"]}
    host, port = host_port(by_uid["prometheus"]["url"])
    assert host == "prometheus" and host in services and port == 9090
    host, _ = host_port(by_uid["jaeger"]["url"])
    assert host in services

    (providers,) = (GRAFANA / "provisioning" / "dashboards").glob("*.yaml")
    (provider,) = load_doc(providers)["providers"]
    assert provider["options"]["path"] == mounted("grafana", GRAFANA / "dashboards")
    used = {
        target["datasource"]["uid"]
        for path in (GRAFANA / "dashboards").glob("*.json")
        for panel in json.loads(path.read_text())["panels"]
        for target in panel.get("targets", [])
    }
    assert used <= set(by_uid), f"dashboards use data sources Grafana lacks: {used - set(by_uid)}"


def test_observability_waits_for_what_it_reads() -> None:
    services = compose_services()
    assert set(services["grafana"]["depends_on"]) == {"prometheus", "jaeger"}
    assert set(services["otel-collector"]["depends_on"]) == {"jaeger"}
    waiting_for = {dep for s in services.values() for dep in s.get("depends_on", {})}
    assert not waiting_for & NO_HEALTHCHECK, "nothing can wait for a service without a check"


def test_the_workspaces_volume_is_shared_at_one_path() -> None:
    services = compose_services()
    volumes = set()
    for name in WORKSPACE_USERS:
        assert services[name]["environment"]["SB_WORKSPACES_DIR"] == WORKSPACES, name
        volume = named_volumes(services[name]).get(WORKSPACES)
        assert volume, f"{name}: no volume at {WORKSPACES}"
        volumes.add(volume)
    assert len(volumes) == 1, f"agent, tools and scheduler must share one volume: {volumes}"
    others = {n for n, s in services.items() if WORKSPACES in named_volumes(s)}
    assert others == WORKSPACE_USERS


def required_variables() -> set[str]:
    """Every variable compose refuses to start without (`${NAME:?message}`)."""
    return {
        name
        for string in compose_strings(load_doc(COMPOSE_FILE))
        for name, modifier in compose_variables(string)
        if modifier.startswith(":?")
    }


def test_env_example_documents_every_required_variable_without_values() -> None:
    text = (ROOT / ".env.example").read_text()
    example = parse_env_file(text)
    assert required_variables() <= set(example), sorted(required_variables() - set(example))
    assert not {k: v for k, v in example.items() if v}, "the example holds no values"
    # What `switchboard secrets > .env` writes is exactly what compose requires.
    assert set(parse_env_file(env_file(database_url=False, grafana=True))) == required_variables()
