"""The service registry: one table the launcher, manifests, Makefile and callers agree on."""

from __future__ import annotations

import importlib.util
import inspect
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from switchboard import host, registry
from switchboard.settings import CommonSettings

REPO = Path(__file__).resolve().parents[3]
REGISTRY_PY = REPO / "libs/switchboard/switchboard/registry.py"
SERVICES = registry.names()


def _field(setting: str) -> str:
    """The settings field an ``SB_*`` variable sets (``SB_OPS_PORT`` -> ``ops_port``)."""
    return setting.removeprefix("SB_").lower()


def test_names_are_unique_and_get_finds_each() -> None:
    assert len(SERVICES) == len(set(SERVICES))
    assert SERVICES  # an empty table would pass everything below
    for name in SERVICES:
        assert registry.get(name).name == name


def test_unknown_service_lists_the_known_ones() -> None:
    with pytest.raises(KeyError) as raised:
        registry.get("nope")
    message = str(raised.value.args[0])
    assert "'nope'" in message
    assert all(name in message for name in SERVICES)


@pytest.mark.parametrize("name", SERVICES)
def test_every_service_module_runs_with_python_dash_m(name: str) -> None:
    service = registry.get(name)
    assert service.module == f"switchboard_{name}"
    assert service.package_dir == f"services/{name}"
    assert (REPO / service.package_dir / service.module / "__init__.py").is_file()
    # find_spec does not execute __main__ (which would start the service)
    assert importlib.util.find_spec(f"{service.module}.__main__") is not None


@pytest.mark.parametrize("name", SERVICES)
def test_host_load_resolves_settings_class_and_serve(name: str) -> None:
    service = registry.get(name)
    settings_class, serve = host.load(service)
    assert settings_class.__name__ == f"{name.capitalize()}Settings"
    assert settings_class.__module__ == f"{service.module}.config"
    assert issubclass(settings_class, CommonSettings)
    assert inspect.iscoroutinefunction(serve)
    assert serve.__module__ == f"{service.module}.server"
    assert list(inspect.signature(serve).parameters) == ["settings", "stop"]


@pytest.mark.parametrize("name", SERVICES)
def test_ports_are_unique_and_their_settings_exist(name: str) -> None:
    service = registry.get(name)
    numbers = [p.number for p in service.ports]
    settings = [p.setting for p in service.ports]
    kinds = [p.name for p in service.ports]
    assert len(numbers) == len(set(numbers)), numbers
    assert len(settings) == len(set(settings)), settings
    assert len(kinds) == len(set(kinds)), kinds
    assert set(kinds) <= {"ops", "grpc", "http"}
    fields = host.load(service)[0].model_fields
    for port in service.ports:
        assert port.setting.startswith("SB_") and port.setting.endswith("_PORT")
        assert _field(port.setting) in fields, port.setting
        assert _field(port.host_setting) in fields, port.host_setting
    assert set(service.needs) <= set(registry.INFRASTRUCTURE)


def test_host_setting_names_the_address_a_port_binds() -> None:
    assert registry.Port("ops", 1, "SB_OPS_PORT").host_setting == "SB_OPS_HOST"
    assert registry.Port("grpc", 1, "SB_AGENT_GRPC_PORT").host_setting == "SB_AGENT_GRPC_HOST"
    assert registry.Port("http", 1, "SB_HTTP_PORT").host_setting == "SB_HTTP_HOST"


def test_gateway_health_is_its_http_port_others_their_ops_port() -> None:
    assert registry.get("gateway").health_port.name == "http"
    assert registry.get("gateway").health_port.public
    for name in SERVICES:
        if name != "gateway":
            assert registry.get(name).health_port.name == "ops", name


def test_addr_setting_and_callers_declare_it() -> None:
    assert registry.get("agent").addr_setting == "SB_AGENT_ADDR"
    served = [s.name for s in registry.SERVICES if s.port("grpc") is not None]
    assert served == ["router", "agent", "memory", "scheduler", "media"]
    for service in registry.SERVICES:
        assert service.addr_setting == f"SB_{service.name.upper()}_ADDR"
        assert service.otel_name == f"switchboard-{service.name}"
        settings_class = host.load(service)[0]
        for callee in service.calls:
            assert registry.get(callee).port("grpc") is not None, (service.name, callee)
            field = _field(registry.get(callee).addr_setting)
            assert field in settings_class.model_fields, (service.name, field)
            given = settings_class.from_environ({registry.get(callee).addr_setting: "h:1,h:2"})
            assert isinstance(given, CommonSettings)
            assert given.address(callee) == "h:1,h:2"


def test_address_of_an_undeclared_callee_is_an_error() -> None:
    with pytest.raises(AttributeError, match="tools_addr"):
        CommonSettings.from_environ({}).address("tools")


def _system_python() -> str:
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and Path(candidate).exists() and ".venv" not in candidate:
            return candidate
    pytest.skip("no system python3")


def _run_registry(*args: str) -> subprocess.CompletedProcess[str]:
    # -S: no site-packages at all, so any third-party import would fail
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(
        [_system_python(), "-S", str(REGISTRY_PY), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_packages_with_system_python_and_stdlib_only() -> None:
    done = _run_registry("packages")
    assert done.returncode == 0, done.stderr
    expected = " ".join(["-e libs/switchboard", *(f"-e services/{n}" for n in SERVICES)])
    assert done.stdout == expected + "\n"
    assert done.stdout.startswith("-e libs/switchboard -e services/gateway ")


def test_names_modules_and_usage_from_the_command_line() -> None:
    assert _run_registry("names").stdout.split() == SERVICES
    assert _run_registry("modules").stdout.split() == [f"switchboard_{n}" for n in SERVICES]
    usage = _run_registry("bogus")
    assert usage.returncode == 2
    assert "usage:" in usage.stderr and usage.stdout == ""
