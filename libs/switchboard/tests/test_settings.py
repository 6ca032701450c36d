"""Settings: read from a given mapping (one process may host several services), secrets hidden,
validation errors in one line."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from switchboard.settings import CommonSettings, ModelSettings, describe
from switchboard_agent.config import AgentSettings
from switchboard_gateway.config import GatewaySettings


def test_from_environ_reads_the_mapping_not_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_NATS_URL", "nats://from-os-environ:1")
    monkeypatch.setenv("SB_SUBJECT_PREFIX", "osenv")
    given = CommonSettings.from_environ({"SB_NATS_URL": "nats://given:2"})
    assert given.nats_url == "nats://given:2"
    assert given.subject_prefix == "sb"  # os.environ's value is not read either
    assert CommonSettings.from_environ({}).nats_url == "nats://127.0.0.1:4222"
    # outside from_environ, the process environment is read as usual
    assert CommonSettings().nats_url == "nats://from-os-environ:1"


def test_each_hosted_service_reads_its_own_mapping() -> None:
    router = CommonSettings.from_environ({"SB_INSTANCE": "router-1", "SB_OPS_PORT": "9101"})
    tools = CommonSettings.from_environ({"SB_INSTANCE": "tools-1"})
    assert (router.instance, router.ops_port) == ("router-1", 9101)
    assert (tools.instance, tools.ops_port) == ("tools-1", 0)


def test_a_failed_read_does_not_leave_the_mapping_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SB_INSTANCE", "from-os")
    with pytest.raises(ValidationError):
        CommonSettings.from_environ({"SB_INSTANCE": "given", "SB_OPS_PORT": "-1"})
    assert CommonSettings().instance == "from-os"


@pytest.mark.parametrize(
    ("environ", "field", "override"),
    [
        ({"SB_NATS_URL": "nats://env:1"}, "nats_url", "nats://override:2"),
        ({"SB_OPS_PORT": "9000"}, "ops_port", 9001),
        ({"OTEL_SERVICE_NAME": "env-name"}, "otel_service_name", "override-name"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317"}, "otlp_endpoint", "http://o:4317"),
    ],
)
def test_overrides_win(environ: dict[str, str], field: str, override: Any) -> None:
    assert getattr(CommonSettings.from_environ(environ), field) != override
    assert getattr(CommonSettings.from_environ(environ, **{field: override}), field) == override
    assert getattr(CommonSettings.from_environ({}, **{field: override}), field) == override


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "SB_OPENAI_API_KEY"])
def test_model_keys_accept_their_usual_and_sb_names(name: str) -> None:
    settings = ModelSettings.from_environ({name: "sk-test"})
    assert settings.openai_api_key.get_secret_value() == "sk-test"
    assert settings.configured_by() == ["OPENAI_API_KEY"]


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("ANTHROPIC_API_KEY", "anthropic_api_key"),
        ("SB_ANTHROPIC_API_KEY", "anthropic_api_key"),
        ("OPENAI_BASE_URL", "openai_base_url"),
        ("SB_OPENAI_BASE_URL", "openai_base_url"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "otlp_endpoint"),
        ("SB_OTLP_ENDPOINT", "otlp_endpoint"),
        ("OTEL_SERVICE_NAME", "otel_service_name"),
        ("SB_OTEL_SERVICE_NAME", "otel_service_name"),
    ],
)
def test_aliases(name: str, field: str) -> None:
    value = getattr(AgentSettings.from_environ({name: "given-value"}), field)
    given = value.get_secret_value() if isinstance(value, SecretStr) else value
    assert given == "given-value"


def test_no_model_configured() -> None:
    assert ModelSettings.from_environ({}).configured_by() == []
    assert ModelSettings.from_environ({"SB_MODEL": "openai:x"}).configured_by() == ["SB_MODEL"]


SECRETS = {
    "SB_DATABASE_URL": "postgresql://u:pw-3f9a1c@db/x",
    "ANTHROPIC_API_KEY": "sk-ant-7d2e4b",
    "OPENAI_API_KEY": "sk-oai-5c8f0a",
}


def _assert_hidden(settings: Any, secrets: list[str]) -> None:
    shown = [repr(settings), str(settings), settings.model_dump_json(), f"{settings}"]
    for text in shown:
        for secret in secrets:
            assert secret not in text
            assert secret.split("-")[-1] not in text
    assert "**********" in settings.model_dump_json()


def test_agent_secrets_never_print() -> None:
    settings = AgentSettings.from_environ(SECRETS)
    assert settings.database_url.get_secret_value() == SECRETS["SB_DATABASE_URL"]
    assert settings.anthropic_api_key.get_secret_value() == SECRETS["ANTHROPIC_API_KEY"]
    assert settings.openai_api_key.get_secret_value() == SECRETS["OPENAI_API_KEY"]
    _assert_hidden(settings, list(SECRETS.values()))


def test_gateway_token_never_prints() -> None:
    token = "gw-token-91b7e3c04f2a8d5e6b1c"
    settings = GatewaySettings.from_environ({"SB_GATEWAY_TOKEN": token})
    assert settings.gateway_token.get_secret_value() == token
    _assert_hidden(settings, [token])


def test_settings_are_immutable() -> None:
    settings = CommonSettings.from_environ({})
    with pytest.raises(ValidationError):
        settings.nats_url = "nats://elsewhere:1"


def test_describe_gives_one_line_naming_each_problem() -> None:
    with pytest.raises(ValidationError) as raised:
        CommonSettings.from_environ(
            {"SB_SUBJECT_PREFIX": "a.b", "SB_OPS_PORT": "99999", "SB_LOG_LEVEL": "loud"}
        )
    line = describe(raised.value)
    assert "\n" not in line
    parts = line.split("; ")
    assert len(parts) == 3
    assert "subject_prefix: SB_SUBJECT_PREFIX must be one NATS token" in line
    assert "(given: 'a.b')" in line
    assert "log_level: SB_LOG_LEVEL must be DEBUG" in line
    assert "ops_port: " in line and "(given: '99999')" in line
    assert "Value error" not in line


def test_log_level_is_normalised() -> None:
    assert CommonSettings.from_environ({"SB_LOG_LEVEL": "debug"}).log_level == "DEBUG"
