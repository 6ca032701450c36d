"""Hosting services in this process: restart backoff, configuration errors in one line, and a
real service (the router on a real nats-server) started, restarted and stopped."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys

import nats
import pytest

from switchboard import bus, host, registry
from switchboard.embedded import free_port
from switchboard.errors import DependencyUnavailable
from switchboard.runtime import service_ready

from .conftest import eventually


def test_backoff_doubles_up_to_the_maximum_and_resets_after_a_long_uptime() -> None:
    backoff = host.Backoff(initial=0.5, maximum=3.0, reset_after=30.0)
    assert [backoff.delay_after(1.0) for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff.delay_after(30.0) == 0.5  # it stayed up long enough: start over
    assert backoff.delay_after(0.1) == 1.0


async def test_invalid_settings_end_run_with_one_line() -> None:
    hosted = host.Hosted(registry.get("router"), {"SB_OPS_PORT": "99999"})
    with pytest.raises(ExceptionGroup) as raised:
        await host.Host([hosted], restart=False).run()
    [error] = raised.value.exceptions
    assert isinstance(error, host.HostError)
    message = str(error)
    assert message.startswith("router: invalid settings: ops_port: ")
    assert "(given: '99999')" in message and "\n" not in message
    assert hosted.starts == 0


async def test_a_failing_service_is_restarted_with_backoff_until_stopped() -> None:
    err = io.StringIO()
    hosted = host.Hosted(registry.get("router"), {"SB_SUBJECT_PREFIX": "a.b"})
    supervisor = host.Host(
        [hosted], backoff=host.Backoff(initial=0.01, maximum=0.02, reset_after=60), err=err
    )
    running = asyncio.create_task(supervisor.run())
    assert await eventually(lambda: err.getvalue().count("\n") >= 3), err.getvalue()
    supervisor.stop()
    await asyncio.wait_for(running, 30)
    lines = err.getvalue().splitlines()
    assert lines[0] == (
        "switchboard: router failed: router: invalid settings: subject_prefix: "
        "SB_SUBJECT_PREFIX must be one NATS token, e.g. 'sb' (given: 'a.b'); "
        "restarting in 0.01s"
    )
    assert lines[1].endswith("restarting in 0.02s") and lines[2].endswith("restarting in 0.02s")


async def test_hosts_a_real_service_restarts_and_stops_it(nats_url: str) -> None:
    environ = {
        "SB_NATS_URL": nats_url,
        "SB_OPS_HOST": "127.0.0.1",
        "SB_SERVICE_TOKEN": "host-test-" + os.urandom(12).hex(),
        "SB_ROUTER_GRPC_PORT": str(free_port()),
    }
    hosted = host.Hosted(registry.get("router"), environ)
    supervisor = host.Host([hosted], restart=False)
    running = asyncio.create_task(supervisor.run())
    nc = await nats.connect(nats_url)
    subjects = bus.Subjects()

    async def ready() -> bool:
        try:
            return await service_ready(nc, subjects, "router", timeout=1)
        except (DependencyUnavailable, nats.errors.Error, TimeoutError):
            return False

    async def until_ready() -> bool:
        for _ in range(300):
            if await ready():
                return True
            await asyncio.sleep(0.05)
        return False

    try:
        assert await until_ready()
        assert hosted.starts == 1
        supervisor.restart(hosted)
        assert await eventually(lambda: hosted.starts == 2)
        assert await until_ready()
        supervisor.stop()
        await asyncio.wait_for(running, 60)
        assert not await ready()
    finally:
        supervisor.stop()
        await nc.close()


def test_main_reports_unknown_services_and_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert host.main(["nope"], {}) == 2
    known = ", ".join(registry.names())
    assert capsys.readouterr().err == f"switchboard: unknown service 'nope'; known: {known}\n"
    assert host.main(["router"], {"SB_LOG_LEVEL": "loud"}) == 2
    err = capsys.readouterr().err
    assert err.startswith("switchboard: invalid settings: log_level: SB_LOG_LEVEL must be")
    assert err.count("\n") == 1


def test_preload_imports_the_services_code_and_names_those_that_fail() -> None:
    # In a fresh interpreter: this one has imported the services' code already.
    code = (
        "import sys; from switchboard import host, registry\n"
        "assert 'switchboard_router.server' not in sys.modules\n"
        "bad = registry.Service('nope', 'a service with no package', ())\n"
        "print(host.preload([registry.get('router'), bad]))\n"
        "print('switchboard_router.server' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    assert out == ["['nope']", "True"]
