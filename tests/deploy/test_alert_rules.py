"""The Prometheus alert rules of deploy/prometheus/ are valid, behave as their unit tests say
(`promtool test rules`), and only use metrics and labels the code exports. promtool comes from
Debian's ``prometheus`` package (``make install`` installs it where it can): without it the
promtool tests skip on a developer machine and fail under ``CI=true``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ruamel.yaml import YAML

from .debian_tools import prometheus_tool
from .metrics_catalog import exported_series, selectors, unknown_references

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [prometheus_tool("promtool"), *args], cwd=RULES, capture_output=True, text=True, timeout=120
    )


def test_the_rules_are_valid() -> None:
    done = run("check", "rules", "alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_fire_as_their_unit_tests_expect() -> None:
    done = run("test", "rules", "alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_series_in_the_rules_is_exported_by_the_code() -> None:
    """A renamed metric or label would leave an alert that can never fire."""
    known = exported_series()
    groups = YAML(typ="safe").load((RULES / "alerts.yml").read_text())["groups"]
    exprs = [rule["expr"] for group in groups for rule in group["rules"]]
    assert all(selectors(expr) for expr in exprs)
    problems = [f"{expr}: {p}" for expr in exprs for p in unknown_references(expr, known)]
    assert not problems, "\n".join(problems)
