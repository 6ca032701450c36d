"""Offline checks of the Compose smoke run (``make compose-smoke``, tests/compose/): its override
deploy/compose/smoke.yml only swaps third-party images for the local builds and points the
services away from what cannot run without an image registry, the local images keep the
official images' contract, the start order follows the health-checked dependencies, and the
configuration file the run edits is what the services accept, refuse and reload as it expects."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from switchboard import registry
from switchboard.configfile import ConfigError
from switchboard.configfile.load import load
from switchboard.configfile.reload import readers, reloadable
from tests.compose import configrun, images
from tests.compose.__main__ import ADDED, COMPOSE_FILES, FAKE_LLM, MODEL_ENV, NOT_RUN, compose_env
from tests.compose.fake_model import model_named, naming_the_model
from tests.compose.stack import StackError, start_levels
from tests.fakes.llm import FakeRequest, tool_then_text

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
    assert command[:3] == ["python", "-m", "tests.compose.fake_model"]
    assert (ROOT / "tests" / "compose" / "fake_model.py").is_file()
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


def fake_request(model: str, tool_results: list[str]) -> FakeRequest:
    return FakeRequest("openai", model, ["get_time"], tool_results, "What time?", "", True, {})


def test_the_fake_models_final_answer_names_the_model_asked_for() -> None:
    script = naming_the_model(tool_then_text())
    first = script(fake_request("smoke-model-a", []))
    assert first.tool_calls == [("get_time", {"timezone": "UTC"})] and not first.text
    final = script(fake_request("smoke-model-b", ["2026-12-02T14:00:00Z"]))
    assert final.text.startswith("Tool said: 2026-12-02T14:00:00Z")
    assert model_named(final.text) == "smoke-model-b"
    assert model_named("Tool said: 12:00") is None


def test_the_run_mounts_a_config_directory_of_its_own(tmp_path: Path) -> None:
    config = configrun.ConfigDir(tmp_path, configrun.Values())
    env = compose_env(set(), {}, config.path)
    assert env["SB_CONFIG_DIR"] == str(config.path) != str(ROOT / "config")
    for service in registry.SERVICES:
        compose = compose_services()[service.name]
        mounts = [v for v in compose["volumes"] if isinstance(v, dict)]
        assert {"source": "${SB_CONFIG_DIR:-./config}", "target": "/etc/switchboard"}.items() <= (
            mounts[0].items()
        )
        assert compose["environment"]["SB_CONFIG_FILE"] == configrun.MOUNTED
    # Readable by the containers' uid 10001: the directory 0755, the file 0644.
    assert stat.S_IMODE(config.path.stat().st_mode) == 0o755
    assert stat.S_IMODE(config.file.stat().st_mode) == 0o644


def test_the_runs_edits_rename_a_new_file_or_rewrite_the_same_one(tmp_path: Path) -> None:
    config = configrun.ConfigDir(tmp_path, configrun.Values())
    inode = config.file.stat().st_ino
    config.write(configrun.Values(model="renamed"), in_place=False)
    assert config.file.stat().st_ino != inode
    assert [p.name for p in config.path.iterdir()] == [configrun.FILE_NAME]
    inode = config.file.stat().st_ino
    text, _ = config.write(configrun.Values(model="in-place"), in_place=True)
    assert config.file.stat().st_ino == inode and config.file.read_text() == text
    assert stat.S_IMODE(config.file.stat().st_mode) == 0o644
    assert config.values.model == "in-place"


def test_the_runs_file_is_accepted_and_sets_what_the_run_watches(tmp_path: Path) -> None:
    config = configrun.ConfigDir(tmp_path, configrun.Values())
    environ = load(config.file, {}).environ
    assert environ["SB_MODEL"] == "openai:smoke-model-a"
    assert environ["SB_DM_POLICY"] == "pairing"
    assert environ["SB_MAX_ITERATIONS"] == "8"
    assert reloadable("SB_MODEL") and reloadable("SB_DM_POLICY")
    assert not reloadable("SB_MAX_ITERATIONS") and readers("SB_MAX_ITERATIONS") == ("agent",)


def test_the_runs_broken_edit_is_refused_with_the_line_it_looks_for(tmp_path: Path) -> None:
    config = configrun.ConfigDir(tmp_path, configrun.Values())
    text, _ = config.write(configrun.Values(dm_policy="opne"), in_place=False)
    with pytest.raises(ConfigError) as refused:
        load(config.file, {})
    line = configrun.line_of(text, "dm_policy")
    assert text.splitlines()[line - 1] == 'dm_policy = "opne"'
    expected = f"{config.file}:{line}: router.dm_policy: 'opne'"
    assert [str(p) for p in refused.value.problems if expected in str(p)], refused.value.problems


def test_log_times_are_read_as_utc() -> None:
    assert configrun.log_time({"ts": "2026-12-02T14:00:01.250Z"}) == 1796220001.25
