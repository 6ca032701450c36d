"""Offline checks of the Compose smoke run (``make compose-smoke``, tests/compose/): its override
deploy/compose/smoke.yml only swaps third-party images for the local builds and points the
services away from what cannot run without an image registry, the local images keep the
official images' contract, and the start order follows the health-checked dependencies."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from switchboard import registry
from tests.compose import images
from tests.compose.__main__ import ADDED, COMPOSE_FILES, FAKE_LLM, MODEL_ENV, NOT_RUN
from tests.compose.stack import StackError, start_levels

from .manifests import ROOT, Doc, compose_services, dockerfile_instructions, load_doc

OVERRIDE = ROOT / "deploy" / "compose" / "smoke.yml"
# What the override may set on a service of docker-compose.yml, and the values it may give.
POINTED_AWAY = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://phoenix:4317", "SB_QDRANT_URL": ""}


def override() -> dict[str, Doc]:
    services: dict[str, Doc] = load_doc(OVERRIDE)["services"]
    return services


def merged_environment(name: str) -> dict[str, object]:
    environment = dict(compose_services()[name].get("environment") or {})
    environment.update(override().get(name, {}).get("environment") or {})
    return environment


def test_the_smoke_run_uses_docker_compose_yml_and_the_override() -> None:
    assert COMPOSE_FILES == [ROOT / "docker-compose.yml", OVERRIDE]
    assert set(compose_services()) >= NOT_RUN


def test_the_override_only_swaps_images_for_local_builds() -> None:
    services = compose_services()
    swapped = {n: s["image"] for n, s in override().items() if n not in ADDED and "image" in s}

    assert swapped == images.LOCAL, "the local builds stand in for exactly these images"
    for name in swapped:
        assert "build" not in services[name], f"{name}: a third-party image, not one of ours"
        assert set(override()[name]) == {"image"}, f"{name}: the override changes only the image"


def test_the_override_changes_nothing_else_of_our_services() -> None:
    for service in registry.SERVICES:
        changes = override().get(service.name, {})
        assert set(changes) <= {"environment"}, f"{service.name}: {sorted(changes)}"
        environment = changes.get("environment") or {}
        assert environment.items() <= POINTED_AWAY.items(), f"{service.name}: {environment}"


def test_the_only_added_service_is_the_fake_model_api() -> None:
    added = set(override()) - set(compose_services())
    assert added == ADDED
    llm = override()[FAKE_LLM]
    command = llm["command"]
    assert command[:3] == ["python", "-m", "tests.fakes.llm"]
    assert (ROOT / "tests" / "fakes" / "llm.py").is_file()
    port = int(command[command.index("--port") + 1])
    # The agent gets the fake's address from the smoke run's environment (passed through).
    base_url = urlsplit(MODEL_ENV["OPENAI_BASE_URL"])
    assert (base_url.hostname, base_url.port) == (FAKE_LLM, port)
    agent = compose_services()["agent"]["environment"]
    assert all(agent[name] is None for name in MODEL_ENV), "compose passes them through"
    assert f"127.0.0.1:{port}/" in " ".join(llm["healthcheck"]["test"])


def test_the_services_send_their_traces_to_the_added_trace_backend() -> None:
    backend = override()[images.TRACE_BACKEND]
    assert backend["image"] == images.TRACE_BACKEND_IMAGE
    instructions = dockerfile_instructions(images.IMAGES / images.TRACE_BACKEND / "Dockerfile")
    grpc_port = next(
        int(part.split("=")[1])
        for keyword, args in instructions
        if keyword == "ENV"
        for part in args.split()
        if part.startswith("PHOENIX_GRPC_PORT=")
    )
    for service in registry.SERVICES:
        endpoint = urlsplit(str(merged_environment(service.name)["OTEL_EXPORTER_OTLP_ENDPOINT"]))
        assert (endpoint.hostname, endpoint.port) == (images.TRACE_BACKEND, grpc_port)


def test_nothing_that_runs_points_at_what_does_not() -> None:
    """Every address of a service that is not run (the Qdrant server, the collector, Jaeger)
    is overridden in every service that is."""
    started = set(compose_services()) - NOT_RUN
    for name in sorted(started):
        for key, value in merged_environment(name).items():
            hosts = re.findall(r"//([a-z0-9-]+)[:/]", str(value))
            assert not set(hosts) & NOT_RUN, f"{name}: {key}={value}"


@pytest.mark.parametrize(
    "path", sorted(images.IMAGES.glob("*/Dockerfile")), ids=lambda p: p.parent.name
)
def test_local_images_are_built_on_a_base_given_as_build_argument(path: Path) -> None:
    instructions = dockerfile_instructions(path)
    first_from = next(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    assert ("ARG", f"BASE_IMAGE={images.LOCAL_BASE.get(path.parent.name, images.BASE)}") in [
        (keyword, args) for keyword, args in instructions[:first_from]
    ]
    assert instructions[first_from] == ("FROM", "${BASE_IMAGE}")
    expected = {"python", images.TRACE_BACKEND, *images.LOCAL}
    assert {p.parent.name for p in images.IMAGES.glob("*/Dockerfile")} == expected


@pytest.mark.parametrize("service", sorted(images.LOCAL))
def test_local_images_take_the_compose_command_unchanged(service: str) -> None:
    """The official images' entrypoint is the server itself; compose's `command` is flags."""
    instructions = dict(dockerfile_instructions(images.IMAGES / service / "Dockerfile"))
    (server,) = json.loads(instructions["ENTRYPOINT"])
    assert Path(server).name in {"nats-server", "prometheus", "sb-postgres-entrypoint"}
    command = compose_services()[service].get("command", [])
    assert not command or str(command[0]).startswith("-"), f"{service}: {command} names a program"


def test_start_order_follows_the_dependencies() -> None:
    services = compose_services()
    started = set(services) - NOT_RUN
    depends_on = {name: set(s.get("depends_on") or {}) for name, s in services.items()}
    levels = start_levels(depends_on, started)
    assert {s for level in levels for s in level} == started
    position = {s: i for i, level in enumerate(levels) for s in level}
    for name in started:
        for dependency in depends_on[name] & started:
            assert position[dependency] < position[name], f"{name} before {dependency}"
    assert set(levels[0]) >= {"nats", "postgres"} and levels[-1] == ["gateway"]


def test_a_dependency_cycle_is_refused() -> None:
    with pytest.raises(StackError, match="cycle"):
        start_levels({"a": {"b"}, "b": {"a"}}, ["a", "b"])


def test_the_base_uses_this_machines_debian_mirror(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\n"
    )
    assert images.debian_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text("deb http://other.example/debian bookworm main\n")
    assert images.debian_mirror(tmp_path) == "http://other.example/debian"
