"""The Prometheus alert rules of deploy/prometheus/ are valid, behave as their unit tests say
(`promtool test rules`), and only use metrics the agent exports. promtool comes from Debian's
``prometheus`` package (``make install`` installs it where it can): without it the promtool
tests skip on a developer machine and fail under ``CI=true``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from ruamel.yaml import YAML

from switchboard_agent import metrics

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool() -> str:
    found = shutil.which("promtool")
    if found:
        return found
    reason = "promtool is not installed (apt-get install prometheus; `make install` does it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: this must run here, not be skipped)", pytrace=False)
    pytest.skip(reason)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], cwd=RULES, capture_output=True, text=True, timeout=120
    )


def test_the_rules_are_valid() -> None:
    done = run("check", "rules", "alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_fire_as_their_unit_tests_expect() -> None:
    done = run("test", "rules", "alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_metric_in_the_rules_is_exported_by_the_agent() -> None:
    """A renamed metric would leave an alert that can never fire."""
    assert metrics.LLM_COST is not None  # the agent's metrics are registered
    exported = {
        name for family in REGISTRY.collect() for name in (family.name, f"{family.name}_total")
    }
    groups = YAML(typ="safe").load((RULES / "alerts.yml").read_text())["groups"]
    used = {
        name
        for group in groups
        for rule in group["rules"]
        for name in re.findall(r"\b(sb_[a-z_]+)", rule["expr"])
    }
    assert used and used <= exported, sorted(used - exported)
