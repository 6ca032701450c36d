"""``switchboard security audit`` run as the command a person types, on a risky and on a safe
configuration (a data dir made in a temporary directory): the findings name what is risky with
a fix, and the exit code is 1 exactly when something is critical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from switchboard import tokens
from switchboard.cli import security
from switchboard.cli.home import Home

SWITCHBOARD = str(Path(sys.executable).parent / "switchboard")
# A chat channel is configured in both: the audit looks at the channels the gateway serves.
TELEGRAM = {
    "SB_TELEGRAM_BOT_TOKEN": "123456:" + tokens.generate(),
    "SB_TELEGRAM_WEBHOOK_SECRET": tokens.generate(),
}


def audit(home: Path, env: dict[str, str]) -> tuple[int, list[dict[str, Any]], str]:
    """Exit code, findings (--json) and the text report of the audit of ``home``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SB_") and "TOKEN" not in k}
    full = {**base, "SB_HOME": str(home), **env}
    as_json = subprocess.run(
        [SWITCHBOARD, "security", "audit", "--json"],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = subprocess.run(
        [SWITCHBOARD, "security", "audit"], env=full, capture_output=True, text=True, timeout=120
    )
    assert as_json.returncode == text.returncode, text.stderr
    return as_json.returncode, json.loads(as_json.stdout), text.stdout


def by_check(findings: list[dict[str, Any]], severity: str) -> dict[str, str]:
    return {f["check"]: f["detail"] for f in findings if f["severity"] == severity}


@pytest.fixture
def safe_home(tmp_path: Path) -> Path:
    home = Home(tmp_path / "home")
    home.create()
    home.token_file.write_text(tokens.generate() + "\n")
    home.token_file.chmod(0o600)
    return home.root


def test_a_safe_configuration_passes(safe_home: Path) -> None:
    env = {**TELEGRAM, "SB_OWNERS": '["telegram:4242"]'}
    code, findings, report = audit(safe_home, env)
    assert code == 0, report
    assert not by_check(findings, "critical"), report
    ok = by_check(findings, "ok")
    for check in ("groups", "session visibility", "sandbox", "secrets", "state"):
        assert check in ok, report


def test_a_risky_configuration_is_reported_with_fixes_and_fails(safe_home: Path) -> None:
    secrets = Home(safe_home).secrets_dir
    (secrets / "nats.json").write_text("{}")
    (secrets / "nats.json").chmod(0o644)  # readable by everyone
    env = {
        **TELEGRAM,
        "SB_TELEGRAM_GROUP_POLICY": "open",
        "SB_GROUP_TOOL_PROFILE": "full",
        "SB_SESSION_VISIBILITY": "all",
        "SB_EXEC_REQUIRE": "",
        "SB_TELEGRAM_DM_POLICY": "open",
        "SB_HOOKS_TOKEN": "changeme-changeme-changeme",
    }
    code, findings, report = audit(safe_home, env)
    assert code == 1, report
    critical = by_check(findings, "critical")
    assert "exec" in critical["groups"] and "telegram" in critical["groups"], report
    assert "SB_EXEC_REQUIRE" in critical["sandbox"], report
    assert "SB_HOOKS_TOKEN" in critical["secrets"], report
    assert "changeme" not in report  # a secret is named, never shown
    assert "nats.json" in critical["state"] and "0644" in critical["state"], report
    warnings = by_check(findings, "warning")
    assert "SB_SESSION_VISIBILITY=all" in warnings["session visibility"], report
    assert "DM policy open" in warnings["direct messages"], report
    assert "owners" in warnings  # no owner configured with a chat channel
    # Every finding that is not ok says how to fix it, in the text report too.
    assert all(f["fix"] for f in findings if f["severity"] != "ok"), findings
    assert report.count("fix: ") == sum(f["severity"] != "ok" for f in findings)


def test_each_critical_alone_fails_the_audit(safe_home: Path) -> None:
    """One risky setting at a time over the safe configuration: each alone is critical (the
    audit's function in this process: the command around it is tested above)."""
    safe = {**TELEGRAM, "SB_OWNERS": '["telegram:4242"]'}
    home = Home(safe_home)
    for risky, check in (
        ({"SB_GROUP_POLICY": "open", "SB_GROUP_TOOL_PROFILE": "coding"}, "groups"),
        ({"SB_EXEC_REQUIRE": ""}, "sandbox"),
        ({"SB_GATEWAY_TOKEN": "password123"}, "secrets"),
    ):
        found = security.audit({**safe, **risky}, home)
        assert {f.check for f in found if f.severity == "critical"} >= {check}, (risky, found)
    # An open group policy with the restricted group profile is a warning, not critical.
    found = security.audit({**safe, "SB_GROUP_POLICY": "open"}, home)
    assert not [f for f in found if f.severity == "critical"], found
    assert "groups" in {f.check for f in found if f.severity == "warning"}, found


def test_loose_permissions_on_the_data_dir_are_critical(safe_home: Path) -> None:
    safe_home.chmod(0o755)
    code, findings, report = audit(safe_home, {**TELEGRAM, "SB_OWNERS": '["telegram:1"]'})
    # Listable by everyone (root's data dir may be 0711: passable, never listable).
    assert code == 1 and "0755" in by_check(findings, "critical")["state"], report


def test_an_accounts_own_open_policy_is_reported(safe_home: Path) -> None:
    """A second bot whose own entry opens its DMs and groups: found and named as that account,
    while the channel's own settings stay fine."""
    security_map = {
        "telegram": {
            "accounts": {"family": {"dm_policy": "open", "group_policy": "open"}},
        }
    }
    env = {
        **TELEGRAM,
        "SB_OWNERS": '["telegram:4242"]',
        "SB_CHANNEL_SECURITY": json.dumps(security_map),
        "SB_GROUP_TOOL_PROFILE": "coding",
    }
    found = security.audit(env, Home(safe_home))
    critical = [f for f in found if f.severity == "critical" and f.check == "groups"]
    assert [f.detail.split(":")[0] for f in critical] == ["telegram/family"], found
    assert "channel_security.telegram.accounts.family.groups" in critical[0].fix
    direct = [f for f in found if f.check == "direct messages"]
    assert [f.detail.split(":")[0] for f in direct] == ["telegram/family"], found
    ok = [f.detail for f in found if f.severity == "ok" and f.check == "groups"]
    assert ok == ["telegram: groups are admitted by allowlist"], found
