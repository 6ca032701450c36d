"""``make compose-smoke``: the Compose stack in real containers, one message through it.

    python -m tests.compose [--keep] [--skip-build]

Builds the images (tests/compose/images.py: a debootstrap base, kept while it exists), writes a
fresh env file with ``switchboard secrets``, starts docker-compose.yml with the override
deploy/compose/smoke.yml under podman-compose as its own project, in the order of the health
checks, sends one ``POST /v1/chat/completions`` with the gateway token (the fake model answers
with a get_time tool call, then with the tool's result), checks the reply, the trace (the
message's trace id in the JSON logs of gateway, router, agent and tools, and its spans in the
trace backend the services export to over OTLP) and the metrics
(Prometheus, scraping every replica), then edits the configuration file the services read from
a directory of the run's own (tests/compose/configrun.py: applied without a restart, refused
with its line, needing a restart), and tears everything down, also when a step fails or the
run is interrupted. Opt-in: not part of ``make test`` (it needs root, podman and minutes).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import httpx
from ruamel.yaml import YAML

from . import checks, configrun, images
from .stack import Stack, StackError, podman_conf, start_levels

ROOT = images.ROOT
COMPOSE_FILES = [ROOT / "docker-compose.yml", ROOT / "deploy" / "compose" / "smoke.yml"]
PROJECT = "switchboard-smoke"
TAG = "smoke"
# In docker-compose.yml, not run here: no image of theirs is obtainable without a registry
# (docs/compose.md); deploy/compose/smoke.yml points the services away from them.
NOT_RUN = frozenset({"qdrant", "otel-collector", "jaeger", "grafana"})
FAKE_LLM = "llm"  # the override's fake of the model API (a third-party API)
# What the override adds: that fake, and a trace backend in place of the collector and Jaeger.
ADDED = frozenset({FAKE_LLM, images.TRACE_BACKEND})
# What the agent is given: the fake model, by the address the override gives it.
MODEL_ENV = {"OPENAI_API_KEY": "sk-compose-smoke-fake", "OPENAI_BASE_URL": "http://llm:8999/v1"}


def say(text: str) -> None:
    print(text, flush=True)


@contextmanager
def step(name: str, figures: dict[str, float]) -> Iterator[None]:
    say(f"==> {name}")
    started = time.monotonic()
    yield
    figures[name] = round(time.monotonic() - started, 1)
    say(f"    done in {figures[name]} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def compose_env(dropped: set[str], ports: dict[str, int], config_dir: Path) -> dict[str, str]:
    """This process's environment for podman-compose, less whatever compose would hand the
    services from it (model keys, channel tokens: the smoke run uses the fake model only);
    the services read the configuration file from ``config_dir``, not the repository's."""
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(MODEL_ENV)
    env["SB_IMAGE_TAG"] = TAG
    env["SB_CONFIG_DIR"] = str(config_dir)
    env.update({name: str(port) for name, port in ports.items()})
    return env


def passed_through(compose_file: Path) -> set[str]:
    """Variables compose passes from its environment to the services (``NAME:`` with no value)."""
    services = YAML(typ="safe").load(compose_file)["services"]
    return {
        name
        for service in services.values()
        for name, value in (service.get("environment") or {}).items()
        if value is None
    }


def write_env_file(directory: Path) -> Path:
    path = directory / ".env"
    secrets = subprocess.run(
        [str(Path(sys.executable).parent / "switchboard"), "secrets"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    path.touch(mode=0o600)
    path.write_text(secrets)
    return path


def env_value(path: Path, name: str) -> str:
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        if key == name:
            return value
    raise checks.CheckFailed(f"{path} has no {name}")


def reachable(url: str) -> bool:
    try:
        httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return False
    return True


def service_url(stack: Stack, service: str, published: int, port: int, path: str) -> str:
    """The published port on this host, else the container's address (rootful podman)."""
    url = f"http://127.0.0.1:{published}"
    if reachable(url + path):
        return url
    fallback = f"http://{stack.address(service)}:{port}"
    say(f"    {service}: published port {published} not reachable; using {fallback}")
    return fallback


def interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.compose", description=__doc__)
    parser.add_argument("--keep", action="store_true", help="leave the stack up (no tear-down)")
    parser.add_argument("--skip-build", action="store_true", help="use the images already built")
    parser.add_argument("--podman-compose", default="podman-compose", help="its command")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, interrupted)
    figures: dict[str, float] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sb-compose-smoke-") as tmp:
        conf = podman_conf(Path(tmp))
        if conf:  # every podman of this run (builds, podman-compose, checks) reads it
            os.environ["CONTAINERS_CONF"] = str(conf)
            say(f"podman settings for this machine: {conf.read_text()!r}")
        if not args.skip_build:
            try:
                with step("build the images", figures):
                    built = images.build_all(TAG, say)
            except images.BuildError as exc:
                say(f"FAILED: {exc}")
                return 1
            for name, seconds in built.steps.items():
                say(f"    {name}: {seconds} s")
        env_file = write_env_file(Path(tmp))
        config = configrun.ConfigDir(Path(tmp), configrun.Values())
        ports = {"SB_GATEWAY_PORT": free_port(), "SB_PROMETHEUS_PORT": free_port()}
        env = compose_env(passed_through(COMPOSE_FILES[0]), ports, config.path)
        stack = Stack(args.podman_compose.split(), PROJECT, COMPOSE_FILES, env_file, env, ROOT)
        ok = False
        try:
            ok = run_smoke(stack, env_file, ports, figures, config)
        except (StackError, KeyboardInterrupt) as exc:
            say(f"FAILED: {exc}")
        finally:
            if args.keep:
                say(f"==> kept: podman-compose -p {PROJECT} ... down -v removes it")
            else:
                with step("tear down", figures):
                    left = stack.down()
                if left:
                    say(f"    left behind: {left}")
                    ok = False
    figures["smoke wall time"] = round(time.monotonic() - started, 1)
    say("==> figures (s): " + ", ".join(f"{k}: {v}" for k, v in figures.items()))
    say("compose smoke: " + ("PASSED" if ok else "FAILED"))
    return 0 if ok else 1


def run_smoke(
    stack: Stack,
    env_file: Path,
    ports: dict[str, int],
    figures: dict[str, float],
    config_dir: configrun.ConfigDir,
) -> bool:
    config = stack.config()
    services = set(config["services"]) - NOT_RUN
    depends_on = {
        name: set(service.get("depends_on") or {}) for name, service in config["services"].items()
    }
    levels = start_levels(depends_on, services)
    with step(
        "start the stack (" + " -> ".join("+".join(level) for level in levels) + ")", figures
    ):
        stack.up(levels, say)
    running = Counter(c.service for c in stack.containers() if c.state == "running")
    say("    containers: " + ", ".join(f"{s} x{n}" for s, n in sorted(running.items())))
    gateway = service_url(stack, "gateway", ports["SB_GATEWAY_PORT"], 8080, "/healthz")
    prometheus = service_url(stack, "prometheus", ports["SB_PROMETHEUS_PORT"], 9090, "/-/ready")
    token = env_value(env_file, "SB_GATEWAY_TOKEN")
    try:
        with step("send one message through the OpenAI API", figures):
            message = checks.send_message(gateway, token)
            say(f"    reply: {message.reply!r}")
            if message.model != config_dir.values.model:  # the file's, read at start
                raise checks.CheckFailed(f"model {message.model!r}, not the file's")
        with step("check the trace in the services' logs", figures):
            lines = checks.check_trace(stack, message.trace_id)
            say(f"    trace {message.trace_id}: log lines {lines}")
        with step("check the trace in the trace backend (Phoenix, over OTLP)", figures):
            backend = f"http://{stack.address(images.TRACE_BACKEND)}:6006"
            names = checks.check_backend_trace(backend, message.trace_id)
            say(f"    {len(names)} spans: {', '.join(names)}")
        with step("check the metrics in Prometheus", figures):
            replicas = sum(len(stack.of(s)) for s in services if s in checks.SCRAPED)
            values = checks.check_metrics(prometheus, replicas)
            say(f"    {values}")
        edits = configrun.ConfigRun(
            stack, config_dir, lambda user: checks.send_message(gateway, token, user).model or ""
        )
        with step("edit the config file (renamed over): the model", figures):
            say("    " + edits.edit("smoke-model-b", in_place=False))
        with step("rewrite the config file in place: the model, dm_policy", figures):
            say("    " + edits.edit("smoke-model-c", "allowlist", in_place=True))
        with step("a refused config file edit", figures):
            say("    " + edits.refused())
        with step("a config file edit that needs a restart", figures):
            say("    " + edits.needs_restart())
    except checks.CheckFailed as exc:
        say(f"FAILED: {exc}")
        for service in (*checks.TRACED, FAKE_LLM):
            say(f"--- last log lines of {service}:")
            for line in stack.logs(service)[-15:]:
                say(f"    {line[:400]}")
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
