"""``$SB_HOME/switchboard.toml`` (issue 27): real files in tmp_path, read the way the
``switchboard`` command reads them, and the ``config`` command run through its entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from switchboard import configfile
from switchboard.configfile import ConfigError, schema
from switchboard.configfile.load import load
from switchboard.settings_reference.__main__ import SCHEMA_OUTPUT
from switchboard.settings_reference.__main__ import main as reference_main
from switchboard_agent.config import AgentSettings
from switchboard_gateway.config import GatewaySettings
from switchboard_router.config import RouterSettings

SCRIPT = Path(sys.executable).parent / "switchboard"
TOKEN = "Xk3-a9Qz_81LmPq0vT7wYb2cR5dEf6Gh"

FILE = """\
# The owner's laptop.
log_level = "DEBUG"

[gateway]
max_request_bytes = 4096  # small on purpose
gateway_token = "env:MY_TOKEN"

[router]
dm_policy = "open"
bindings = [{ channel = "slack", group = "C1", agent = "team" }]

[agent]
max_iterations = 3
"""


def write(home: Path, text: str, mode: int = 0o644) -> Path:
    path = configfile.path_for(home)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def problems(home: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        configfile.apply(dict(environ or {}), home)
    return str(caught.value)


def cli(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SB_", "OPENAI_"))}
    return subprocess.run(
        [str(SCRIPT), *args],
        env={**clean, "SB_HOME": str(home), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_file_gives_the_settings_of_two_services(tmp_path: Path) -> None:
    write(tmp_path, FILE)
    environ = {"MY_TOKEN": TOKEN}
    applied = configfile.apply(environ, tmp_path)
    assert applied is not None and "SB_BINDINGS" in applied.set
    gateway = GatewaySettings.from_environ(environ)
    router = RouterSettings.from_environ(environ)
    agent = AgentSettings.from_environ(environ)
    assert gateway.max_request_bytes == 4096 and gateway.log_level == "DEBUG"
    assert gateway.gateway_token is not None
    assert gateway.gateway_token.get_secret_value() == TOKEN
    assert router.dm_policy.value == "open" and router.log_level == "DEBUG"
    assert [(b.group, b.agent) for b in router.bindings] == [("C1", "team")]
    assert agent.max_iterations == 3


def test_the_environment_overrides_the_file(tmp_path: Path) -> None:
    write(tmp_path, FILE)
    environ = {"MY_TOKEN": TOKEN, "SB_MAX_ITERATIONS": "7"}
    applied = configfile.apply(environ, tmp_path)
    assert applied is not None and applied.overridden == ("SB_MAX_ITERATIONS",)
    assert AgentSettings.from_environ(environ).max_iterations == 7
    assert configfile.apply({}, tmp_path / "nowhere") is None


def test_env_and_file_references_are_resolved(tmp_path: Path) -> None:
    (tmp_path / "openai.key").write_text("sk-from-file\n", encoding="utf-8")
    write(tmp_path, '[agent]\nopenai_api_key = "file:openai.key"\n')
    environ: dict[str, str] = {}
    configfile.apply(environ, tmp_path)
    assert AgentSettings.from_environ(environ).openai_api_key.get_secret_value() == "sk-from-file"
    # env:NAME reads the environment; a missing variable is an error naming it and the line.
    write(tmp_path, FILE)
    assert "gateway.gateway_token: refers to the environment variable MY_TOKEN" in problems(
        tmp_path
    )
    assert f"{configfile.path_for(tmp_path)}:6:" in problems(tmp_path)


def test_a_secret_value_in_a_file_others_can_read_is_refused(tmp_path: Path) -> None:
    text = FILE.replace('"env:MY_TOKEN"', f'"{TOKEN}"')
    path = write(tmp_path, text, 0o644)
    message = problems(tmp_path)
    assert str(path) in message and "gateway.gateway_token (line 6)" in message
    assert "0644" in message and TOKEN not in message
    path.chmod(0o600)
    environ: dict[str, str] = {}
    configfile.apply(environ, tmp_path)
    assert environ["SB_GATEWAY_TOKEN"] == TOKEN


def test_syntax_error_and_bad_value_name_their_line(tmp_path: Path) -> None:
    path = write(tmp_path, FILE + "[tools\n")
    assert f"{path}:14: not valid TOML" in problems(tmp_path, {"MY_TOKEN": TOKEN})
    write(tmp_path, FILE.replace('dm_policy = "open"', 'dm_policy = "opne"'))
    message = problems(tmp_path, {"MY_TOKEN": TOKEN})
    assert f"{path}:9: router.dm_policy:" in message
    assert "one of: open, allowlist, pairing" in message
    write(tmp_path, FILE.replace("max_iterations = 3", "max_iterations = 0"))
    assert f"{path}:13: agent.max_iterations:" in problems(tmp_path, {"MY_TOKEN": TOKEN})


def test_a_value_the_settings_classes_refuse_is_refused(tmp_path: Path) -> None:
    """The schema cannot see inside SB_BINDINGS' entries; the router's class can."""
    path = write(tmp_path, FILE.replace('agent = "team"', 'agnt = "team"'))
    message = problems(tmp_path, {"MY_TOKEN": TOKEN})
    assert f"{path}:10: router.bindings: at [0].agent: Field required" in message
    # A check of the whole class (the gateway's weak-token check) still names the key's line.
    write(tmp_path, FILE)
    message = problems(tmp_path, {"MY_TOKEN": "abc" * 10})
    assert f"{path}:6: gateway.gateway_token: SB_GATEWAY_TOKEN is too weak" in message
    assert "abcabc" not in message
    # A table inside a section: the line of the key inside it.
    write(tmp_path, FILE + '\n[router.channel_security.telegram]\ndm_policy = "never"\n')
    message = problems(tmp_path, {"MY_TOKEN": TOKEN})
    assert f"{path}:16: router.channel_security: at telegram.dm_policy:" in message


def test_an_unknown_key_names_the_nearest_known_one(tmp_path: Path) -> None:
    path = write(tmp_path, FILE.replace("max_iterations", "max_iteratons"))
    message = problems(tmp_path, {"MY_TOKEN": TOKEN})
    assert f"{path}:13: agent.max_iteratons: unknown setting (did you mean max_iterations?)" in (
        message
    )
    write(tmp_path, FILE.replace("[router]\n", "[gateway_]\n"))
    assert "(did you mean gateway?)" in problems(tmp_path, {"MY_TOKEN": TOKEN})
    write(tmp_path, FILE.replace("[router]\ndm_policy", "[tools]\ndm_policy"))
    assert "tools.dm_policy: not read by [tools]: write it in [router]" in problems(
        tmp_path, {"MY_TOKEN": TOKEN}
    )


def test_config_set_keeps_comments_and_refuses_a_bad_value(tmp_path: Path) -> None:
    path = write(tmp_path, FILE, 0o600)
    done = cli(tmp_path, "config", "set", "agent.max_iterations", "5", env={"MY_TOKEN": TOKEN})
    assert done.returncode == 0, done.stderr
    text = path.read_text(encoding="utf-8")
    assert "# The owner's laptop." in text and "# small on purpose" in text
    assert "max_iterations = 5" in text
    assert load(path, {"MY_TOKEN": TOKEN}).environ["SB_MAX_ITERATIONS"] == "5"

    refused = cli(tmp_path, "config", "set", "router.dm_policy", "never", env={"MY_TOKEN": TOKEN})
    assert refused.returncode == 1
    assert "router.dm_policy" in refused.stderr and "one of: open, allowlist, pairing" in (
        refused.stderr
    )
    assert path.read_text(encoding="utf-8") == text
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_config_set_reaches_inside_a_table_setting(tmp_path: Path) -> None:
    """An allowlist of one account, written by its path: the tables on the way are made, the
    router reads it, a bad field inside is refused with nothing written, and so is a path
    through a value that is not a table."""
    path = write(tmp_path, FILE, 0o600)
    env = {"MY_TOKEN": TOKEN}
    key = "router.channel_security.telegram.accounts.family.allow_from"
    done = cli(tmp_path, "config", "set", key, '["43"]', env=env)
    assert done.returncode == 0, done.stderr
    text = path.read_text(encoding="utf-8")
    assert "[router.channel_security.telegram.accounts.family]" in text
    assert "# small on purpose" in text
    settings = RouterSettings.from_environ(load(path, env).environ)
    assert settings.channel("telegram", "family").allow_from == {"43"}
    assert settings.channel("telegram").allow_from == frozenset()
    got = cli(tmp_path, "config", "get", "router.channel_security.telegram.accounts")
    assert json.loads(got.stdout) == {"family": {"allow_from": ["43"]}}

    bad = cli(tmp_path, "config", "set", "router.channel_security.telegram.grops", "[]", env=env)
    assert bad.returncode == 1 and "grops" in bad.stderr
    through = cli(tmp_path, "config", "set", "router.dm_policy.telegram", "open", env=env)
    assert through.returncode == 1 and "unknown setting" in through.stderr
    into_value = cli(tmp_path, "config", "set", f"{key}.x", "1", env=env)
    assert into_value.returncode == 1 and "not a table" in into_value.stderr
    assert path.read_text(encoding="utf-8") == text


def test_config_show_get_validate_and_doctor(tmp_path: Path) -> None:
    path = write(tmp_path, FILE.replace('"env:MY_TOKEN"', f'"{TOKEN}"'), 0o600)
    shown = cli(tmp_path, "config", "show")
    assert shown.returncode == 0 and TOKEN not in shown.stdout
    assert 'gateway_token = "**********"' in shown.stdout and "# small on purpose" in shown.stdout
    got = cli(tmp_path, "config", "get", "gateway.gateway_token")
    assert got.stdout.strip() == "**********"
    got = cli(tmp_path, "config", "get", "router.bindings")
    assert json.loads(got.stdout) == [{"channel": "slack", "group": "C1", "agent": "team"}]
    assert cli(tmp_path, "config", "validate").returncode == 0

    doctor = cli(tmp_path, "doctor", env={"SB_MAX_ITERATIONS": "9"})
    line = next(x for x in doctor.stdout.splitlines() if "config file" in x)
    assert line.startswith("OK") and "SB_MAX_REQUEST_BYTES" in line
    assert "overridden by the environment: SB_MAX_ITERATIONS" in line

    path.chmod(0o644)
    refused = cli(tmp_path, "config", "validate")
    assert refused.returncode == 1 and "chmod 600" in refused.stderr
    doctor = cli(tmp_path, "doctor")
    assert any(x.startswith("FAIL  config file") for x in doctor.stdout.splitlines())
    # Any other command stops on a refused file, before doing anything.
    up = cli(tmp_path, "up")
    assert up.returncode == 2 and "chmod 600" in up.stderr


def test_schema_is_current_and_drift_is_caught(tmp_path: Path) -> None:
    assert json.loads(SCHEMA_OUTPUT.read_text(encoding="utf-8")) == schema.generate()
    reference = tmp_path / "configuration.md"
    stale = tmp_path / "switchboard.schema.json"
    assert reference_main(["--output", str(reference)]) == 0
    assert reference_main(["--schema", "--output", str(stale)]) == 0
    args = ["--check", "--output", str(reference), "--schema-output", str(stale)]
    assert reference_main(args) == 0
    drifted = json.loads(stale.read_text(encoding="utf-8"))
    del drifted["properties"]["agent"]["properties"]["max_iterations"]
    stale.write_text(json.dumps(drifted), encoding="utf-8")
    assert reference_main(args) == 1


def test_a_bad_value_inside_a_table_names_its_own_line(tmp_path: Path) -> None:
    text = (
        "[router]\n"
        'dm_policy = "allowlist"\n'
        "\n"
        "[router.channel_security.telegram]\n"
        'allow_from = ["42"]\n'
        "\n"
        "[router.channel_security.telegram.accounts.family]\n"
        'allow_from = ["43"]\n'
        'dm_policy = "opne"\n'
    )
    write(tmp_path, text)
    said = problems(tmp_path)
    assert "switchboard.toml:9: router.channel_security: at telegram.accounts.family" in said
    assert "'open', 'allowlist' or 'pairing'" in said
