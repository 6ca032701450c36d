"""Which files the generator owns, whole or in blocks, and what goes in them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from .. import natsauth, registry
from ..registry import Service
from . import compose, configfile, k8s, netpol
from .regions import Span, fill

BANNER = [
    "# Generated from libs/switchboard/switchboard/registry.py (and deploygen/overrides.py) by",
    "# `python -m switchboard.deploygen`: edit those, not this file (`make lint` checks it).",
]
COMPOSE = "docker-compose.yml"
BASE = "k8s/base"
DEV_DEPENDENCIES = "k8s/components/dev-dependencies"
PROD = "k8s/overlays/prod/kustomization.yaml"

Render = Callable[[str], str]  # the file's current text -> its generated text


def _blocks(spans: Callable[[], list[Span]], where: str) -> Render:
    return lambda text: fill(text, spans(), where)


def _whole(text: str) -> Render:
    return lambda _current: text


def _compose_spans(services: Sequence[Service]) -> list[Span]:
    return [
        Span(
            tuple((s.name, compose.service_block(s, services)) for s in services),
            "  ",
            services=True,
        ),
        Span((("nats passwords", compose.nats_passwords()),), "      "),
        Span((("service volumes", compose.volumes(services)),), "  "),
    ]


def _netpol_spans(services: Sequence[Service]) -> list[Span]:
    policies = tuple((s.name, netpol.policy(s, services)) for s in services)
    return [Span(policies, separator=("---",), services=True)]


def _dev_policy_spans(services: Sequence[Service]) -> list[Span]:
    return [
        Span(((f"{server} clients", netpol.clients(server, services)),), "    ")
        for server in registry.INFRASTRUCTURE
    ]


def _images(services: Sequence[Service]) -> list[str]:
    lines = []
    for s in services:
        lines += [
            f"  - name: switchboard/{s.name}",
            f"    newName: registry.example.com/switchboard/{s.name}",
            '    newTag: "1.0.0"',
        ]
    return lines


def outputs(services: Sequence[Service] | None = None) -> dict[str, Render]:
    """Path (from the repository root) -> how to generate it. ``services`` defaults to the
    registry's, read at call time (a test may put a copy with one more entry in its place)."""
    services = registry.SERVICES if services is None else services
    files: dict[str, Render] = {
        f"{BASE}/{s.name}.yaml": _whole(k8s.manifest(s, services, BANNER)) for s in services
    }
    files[f"{BASE}/disruption-budgets.yaml"] = _whole(k8s.disruption_budgets(services, BANNER))
    files[f"{BASE}/config-file.yaml"] = _whole(configfile.configmap())
    files[configfile.EXAMPLE_PATH] = _whole(configfile.example_file())
    files[natsauth.DEPLOY_CONFIG] = _whole(natsauth.server_config())
    files[COMPOSE] = _blocks(lambda: _compose_spans(services), COMPOSE)
    files[f"{BASE}/network-policies.yaml"] = _blocks(
        lambda: _netpol_spans(services), f"{BASE}/network-policies.yaml"
    )
    resources = [f"  - {s.name}.yaml" for s in services]
    files[f"{BASE}/kustomization.yaml"] = _blocks(
        lambda: [Span((("services", resources),), "  ")], f"{BASE}/kustomization.yaml"
    )
    files[f"{BASE}/config.yaml"] = _blocks(
        lambda: [Span((("secret keys", k8s.secret_keys(services)),))], f"{BASE}/config.yaml"
    )
    files[f"{DEV_DEPENDENCIES}/nats.yaml"] = _blocks(
        lambda: [Span((("nats passwords", k8s.nats_passwords()),), "            ")],
        f"{DEV_DEPENDENCIES}/nats.yaml",
    )
    files[f"{DEV_DEPENDENCIES}/network-policies.yaml"] = _blocks(
        lambda: _dev_policy_spans(services), f"{DEV_DEPENDENCIES}/network-policies.yaml"
    )
    files[PROD] = _blocks(lambda: [Span((("images", _images(services)),), "  ")], PROD)
    return files


def generate(root: Path, services: Sequence[Service] | None = None) -> dict[Path, str]:
    """Every generated file under ``root``: path -> the text it must have."""
    result = {}
    for relative, render in outputs(services).items():
        path = root / relative
        current = path.read_text() if path.exists() else ""
        result[path] = render(current)
    return result
