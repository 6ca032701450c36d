"""The status page (public, no secrets) and /readyz: the system's readiness, one check per
other service of the registry, the agent's gRPC, and the gateway's own NATS and start."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from switchboard import registry
from switchboard.runtime import ServiceRuntime
from switchboard.settings import CommonSettings

from .gateway_harness import Gateway, started

OPS_LOG = "switchboard.ops"


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(nats_url, tmp_path) as gateway:
        yield gateway


def expected_checks() -> set[str]:
    gateway = registry.get("gateway")
    others = {s.name for s in registry.SERVICES if s.name != gateway.name}
    return others | {f"{c}_grpc" for c in gateway.calls} | {"nats", "started"}


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == OPS_LOG and r.levelno == logging.WARNING
    ]


async def test_status_page_is_public_html_without_secrets(gw: Gateway) -> None:
    response = await gw.client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "Switchboard is running" in response.text
    everything = response.text + "".join(f"{k}: {v}" for k, v in response.headers.items())
    assert gw.token not in everything
    assert gw.settings.agent_addr not in everything
    assert gw.settings.nats_url not in everything


async def test_readyz_is_503_and_logs_each_failing_check_once(
    gw: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    """No other service answers: their checks fail with NATS' no-responders, the gRPC of the
    services the gateway calls with a refused connection; the gateway's own checks pass (it is
    started)."""
    caplog.set_level(logging.INFO, OPS_LOG)
    serving = asyncio.create_task(gw.rt.wait_stopped())
    try:
        await asyncio.sleep(0)  # wait_stopped marks the service started
        first = await gw.client.get("/readyz")
        again = await gw.client.get("/readyz")
    finally:
        gw.rt.stopping.set()
        await serving
    assert first.status_code == 503
    body = first.json()
    assert body["status"] == "not ready"
    assert set(body["checks"]) == expected_checks()
    failing = {name for name, ok in body["checks"].items() if not ok}
    assert failing == expected_checks() - {"nats", "started"}
    assert again.status_code == 503
    assert again.json() == body

    logged = warnings(caplog)
    grpc_checks = {f"{callee}_grpc" for callee in registry.get("gateway").calls}
    for name in failing - grpc_checks:
        [line] = [w for w in logged if w.startswith(f"not ready: {name} failed")]
        assert "NoRespondersError" in line, line
    for name in grpc_checks:
        [grpc_line] = [w for w in logged if w.startswith(f"not ready: {name} failed")]
        assert "(the check said no)" in grpc_line
    assert len(logged) == len(failing)  # once per check, not once per probe


async def test_readyz_reports_a_service_that_answers_but_is_not_ready(
    gw: Gateway, nats_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A router whose runtime answers health but has not started fails with the checks it
    fails (DependencyUnavailable from service_ready); once started, its check passes and the
    recovery is logged."""
    caplog.set_level(logging.INFO, OPS_LOG)
    router_settings = CommonSettings.from_environ(
        {}, home=tmp_path / "router", nats_url=nats_url, ops_host="127.0.0.1", ops_port=0
    )
    router_stop = asyncio.Event()
    async with ServiceRuntime(registry.get("router"), router_settings, router_stop) as router:
        before = await gw.client.get("/readyz")
        serving = asyncio.create_task(router.wait_stopped())
        await asyncio.sleep(0)
        after = await gw.client.get("/readyz")
        router_stop.set()
        await serving
    assert before.status_code == 503
    assert before.json()["checks"]["router"] is False
    [line] = [w for w in warnings(caplog) if w.startswith("not ready: router failed")]
    assert line == "not ready: router failed (DependencyUnavailable: router fails ['started'])"
    assert after.status_code == 503  # agent and tools are still missing
    assert after.json()["checks"]["router"] is True
    assert "ready again: router passes" in [r.getMessage() for r in caplog.records]
