"""The configuration reference (switchboard.settings_reference): every setting of every settings
class as data, rendered as docs/configuration.md, and the drift check ``make lint`` runs."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

from switchboard import host, registry
from switchboard.settings import Settings, environment_names
from switchboard.settings_reference import Setting, Source, collect, missing, render, sources
from switchboard.settings_reference.__main__ import generate, main

REPO = Path(__file__).resolve().parents[3]
PLANTED = "hunter2-planted-secret-value"


class _Sample(Settings):
    """Fields whose descriptions come from each place the reference reads them."""

    # Above the field, over
    # two lines.
    above: int = Field(default=3, ge=1, le=9)
    trailing_s: float = Field(default=2.5, gt=0)  # At the end of its line.
    described: str = Field(default="a # not a comment", description="From Field.")  # ignored
    # --- a section marker, not a description ---
    bare: list[str] = Field(default_factory=list)
    token: SecretStr = SecretStr(PLANTED)  # A planted secret default.
    empty_token: SecretStr = SecretStr("")  # An empty secret.


def _sample() -> tuple[list[Setting], str]:
    chosen = [Source("sample", "a sample service", _Sample, True)]
    settings = collect(chosen)
    return settings, render(settings, chosen)


@pytest.fixture(scope="module")
def reference() -> dict[str, Setting]:
    return {s.env: s for s in collect()}


@pytest.mark.parametrize(
    ("env", "reader", "type_text", "default", "secret"),
    [
        ("SB_TELEGRAM_MODE", "gateway", "one of: webhook, polling", "webhook", False),
        ("SB_TELEGRAM_BOT_TOKEN", "gateway", "string", "unset", True),
        ("SB_DM_POLICY", "router", "one of: open, allowlist, pairing", "pairing", False),
        ("SB_MAX_ITERATIONS", "agent", "int 1..100", "8", False),
        ("SB_TOOL_TIMEOUT_S", "agent", "seconds > 0", "60", False),
        ("OPENAI_API_KEY", "agent", "string", "unset", True),
        ("SB_FUSION", "memory", "one of: rrf, weighted", "rrf", False),
        (
            "SB_EXEC_MEMORY_MAX",
            "tools",
            "size (bytes, or 512M, 1G) >= 0",
            "536870912 (512 MiB)",
            False,
        ),
        ("SB_TAVILY_API_KEY", "tools", "string", "unset", True),
        ("SB_SCHEDULER_POLL_S", "scheduler", "seconds > 0, <= 60", "1", False),
        ("SB_MEDIA_MAX_BYTES", "media", "bytes 1024..1073741824", "52428800 (50 MiB)", False),
        ("SB_TRANSCRIPTION_API_KEY", "media", "string", "unset", True),
        ("SB_NATS_CLUSTER", "launcher", "int 1..5", "1", False),
        ("SB_SERVICE", "serve", "string", "empty", False),
    ],
)
def test_a_known_setting_of_every_program(
    reference: dict[str, Setting],
    env: str,
    reader: str,
    type_text: str,
    default: str,
    secret: bool,
) -> None:
    setting = reference[env]
    assert reader in setting.services
    assert (setting.type_text, setting.default, setting.secret) == (type_text, default, secret)
    assert setting.description


def test_a_setting_several_services_read_is_one_row(reference: dict[str, Setting]) -> None:
    assert reference["SB_NATS_URL"].services[: len(registry.names())] == tuple(registry.names())
    assert set(reference["SB_DATABASE_URL"].services) == {
        "agent", "memory", "scheduler", "media", "launcher"
    }  # fmt: skip
    # Read under its usual name first, the SB_ one as an alias; not a row of its own.
    assert reference["OPENAI_API_KEY"].aliases == ("SB_OPENAI_API_KEY",)
    assert "SB_OPENAI_API_KEY" not in reference
    assert reference["OTEL_EXPORTER_OTLP_ENDPOINT"].aliases == ("SB_OTLP_ENDPOINT",)
    # The router's per-channel variables, described by the model field each fills.
    per_channel = reference["SB_<CHANNEL>_DM_POLICY"]
    assert per_channel.type_text == "one of: open, allowlist, pairing"
    assert per_channel.services == ("router",)


def test_every_service_of_the_registry_is_covered(reference: dict[str, Setting]) -> None:
    """A service added to the registry is in the reference with every variable it reads."""
    assert [s.name for s in sources() if s.service] == registry.names()
    for service in registry.SERVICES:
        read = environment_names(host.settings_class(service))
        listed = {
            name
            for s in reference.values()
            if service.name in s.services
            for name in (s.env, *s.aliases)
        }
        assert read <= listed, f"{service.name}: {sorted(read - listed)} not in the reference"


def _settings_classes() -> list[type[BaseSettings]]:
    """Every class of the code base (not its tests) that subclasses a settings class, found in
    the source: a new one anywhere must be reached by the reference."""
    roots = [
        REPO / "libs/switchboard/switchboard",
        *sorted((REPO / "services").glob("*/switchboard_*")),
    ]
    found: list[type[BaseSettings]] = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "tests" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = [
                node.name
                for node in tree.body
                if isinstance(node, ast.ClassDef)
                and any(ast.unparse(b).endswith("Settings") for b in node.bases)
            ]
            if not names:
                continue
            module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
            loaded = importlib.import_module(module.removesuffix(".__init__"))
            found += [
                cls
                for name in names
                if isinstance(cls := getattr(loaded, name), type) and issubclass(cls, BaseSettings)
            ]
    return found


def test_every_settings_class_in_the_code_is_covered(reference: dict[str, Setting]) -> None:
    classes = _settings_classes()
    assert len(classes) >= 20  # the search found the services', the mixins and the CLI's
    listed = {name for s in reference.values() for name in (s.env, *s.aliases)}
    for cls in classes:
        unlisted = environment_names(cls) - listed
        assert not unlisted, f"{cls.__qualname__}: {sorted(unlisted)} not in the reference"


def test_descriptions_come_from_field_then_comments() -> None:
    settings, _ = _sample()
    by_field = {s.field: s for s in settings}
    assert by_field["above"].description == "Above the field, over two lines."
    assert by_field["trailing_s"].description == "At the end of its line."
    assert by_field["described"].description == "From Field."
    assert by_field["bare"].description == ""  # the section marker is not one
    assert missing(settings) == ["SB_BARE"]
    assert by_field["above"].type_text == "int 1..9"
    assert by_field["trailing_s"].type_text == "seconds > 0"
    assert by_field["described"].default == "a # not a comment"


def test_a_secret_default_is_never_printed() -> None:
    settings, text = _sample()
    by_field = {s.field: s for s in settings}
    assert by_field["token"].secret and by_field["token"].default == "hidden (built in)"
    assert by_field["empty_token"].default == "unset"
    assert PLANTED not in text
    assert PLANTED not in repr(settings)


def test_the_real_secrets_defaults_are_not_in_the_reference(reference: dict[str, Setting]) -> None:
    text = generate()
    for setting in reference.values():
        if setting.secret:
            assert set(setting.default.split(": ")) & {"unset", "hidden (built in)"}
    # DatabaseSettings' built-in URL is a SecretStr: its value is nowhere in the file.
    assert "postgresql://postgres@127.0.0.1" not in text


def test_the_output_does_not_depend_on_the_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = generate()
    monkeypatch.setenv("HOME", str(tmp_path / "someone-else"))
    monkeypatch.chdir(tmp_path)
    second = generate()
    assert first == second
    assert str(tmp_path) not in second and str(Path.home()) not in first
    assert "`~/.switchboard`" in first


def test_check_passes_on_the_generated_file_and_fails_on_a_changed_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "configuration.md"
    assert main(["--output", str(target)]) == 0
    assert main(["--check", "--output", str(target)]) == 0
    text = target.read_text(encoding="utf-8")
    target.write_text(text.replace("| `SB_NATS_URL` |", "| `SB_NATS_URL_OLD` |"), encoding="utf-8")
    capsys.readouterr()
    assert main(["--check", "--output", str(target)]) == 1
    err = capsys.readouterr().err
    assert "out of date" in err and "SB_NATS_URL_OLD" in err
    target.unlink()
    assert main(["--check", "--output", str(target)]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_check_lists_the_settings_without_a_description(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import switchboard.settings_reference.__main__ as cli

    chosen = [Source("sample", "a sample service", _Sample, True)]
    monkeypatch.setattr(cli, "sources", lambda: chosen)
    target = tmp_path / "configuration.md"
    assert main(["--output", str(target)]) == 0
    assert "no description" in capsys.readouterr().err
    assert main(["--check", "--output", str(target)]) == 0
    assert "SB_BARE" in capsys.readouterr().err
    assert "(no description yet)" in target.read_text(encoding="utf-8")
