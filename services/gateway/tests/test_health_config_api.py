"""``GET /api/health`` and ``GET /api/config`` on the gateway as its service builds it, against a
real nats-server: the replicas that answer (each one, not one of the queue group), the queues'
backlogs and the dead letters; the settings with their secrets redacted and the audit's
findings; both behind the token."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from switchboard import bus, registry
from switchboard.runtime import VERSION, ServiceRuntime
from switchboard.settings import CommonSettings
from switchboard.v1 import messages_pb2

from .gateway_harness import Gateway, started


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with started(
        nats_url, tmp_path, a2a_public_url="https://agent:pa55word-in-url@example.com/a2a"
    ) as gateway:
        yield gateway


async def test_both_routes_need_the_token(gw: Gateway) -> None:
    for path in ("/api/health", "/api/config"):
        refused = await gw.client.get(path)
        assert refused.status_code == 401, path


async def test_health_lists_every_replica_the_queues_and_the_dead_letters(
    gw: Gateway, nats_url: str, tmp_path: Path
) -> None:
    """Two router replicas (one started, one not), the gateway itself, nobody else; the
    consumers not made yet; one dead letter."""
    await bus.js_publish(
        gw.rt.js,
        gw.rt.subjects.deadletter("outbound", "fakechat"),
        messages_pb2.OutboundMessage(channel="fakechat", text="undeliverable"),
        msg_id="dead-1",
    )
    stops = [asyncio.Event(), asyncio.Event()]
    router = registry.get("router")
    settings = [
        CommonSettings.from_environ({}, home=tmp_path / f"r{i}", nats_url=nats_url) for i in (0, 1)
    ]
    async with (
        ServiceRuntime(router, settings[0], stops[0]) as started_one,
        ServiceRuntime(router, settings[1], stops[1]),
    ):
        serving = asyncio.create_task(started_one.wait_stopped())
        await asyncio.sleep(0)  # wait_stopped marks it started
        try:
            answer = await gw.client.get("/api/health", headers=gw.auth)
        finally:
            stops[0].set()
            await serving
    assert answer.status_code == 200, answer.text
    body = answer.json()
    services = {s["name"]: s for s in body["services"]}
    assert list(services) == registry.names()
    routers = services["router"]["replicas"]
    assert len(routers) == 2
    assert sorted(r["ready"] for r in routers) == [False, True]
    [waiting] = [r for r in routers if not r["ready"]]
    assert waiting["failing"] == ["started"]
    assert {r["version"] for r in routers} == {VERSION}
    assert services["router"]["ready"] is False
    [gateway] = services["gateway"]["replicas"]
    assert gateway["instance"] == gw.rt.instance
    for name in set(registry.names()) - {"router", "gateway"}:
        assert services[name] == {"name": name, "ready": False, "replicas": []}
    assert body["ready"] is False
    queues = {q["queue"]: q for q in body["queues"]}
    assert set(queues) == {"router", "lanes", "executor"}
    assert queues["lanes"]["consumer"] == "dispatch"
    assert all("not started" in q["error"] for q in queues.values())
    dead = body["dead_letters"]
    assert dead["messages"] == 1
    assert dead["subjects"] == {gw.rt.subjects.deadletter("outbound", "fakechat"): 1}
    assert body["failovers"] is None


async def test_health_reports_a_consumers_backlog(gw: Gateway) -> None:
    js = gw.rt.js
    lanes = gw.rt.subjects.stream("LANES")
    await js.add_consumer(
        lanes,
        ConsumerConfig(
            durable_name="dispatch",
            filter_subject=gw.rt.subjects.lanes(),
            ack_policy=AckPolicy.EXPLICIT,
        ),
    )
    for i in range(3):
        await bus.js_publish(
            js, gw.rt.subjects.lane("main", f"t{i}"), messages_pb2.LaneItem(), msg_id=f"l{i}"
        )
    body = (await gw.client.get("/api/health", headers=gw.auth)).json()
    [lane] = [q for q in body["queues"] if q["queue"] == "lanes"]
    assert (lane["pending"], lane["ack_pending"]) == (3, 0)


async def test_a_failing_part_is_reported_without_its_reason(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_reason = "internal detail 7f3a"

    async def broken(*_: object, **__: object) -> object:
        raise RuntimeError(secret_reason)

    monkeypatch.setattr(gw.rt.js, "stream_info", broken)
    monkeypatch.setattr(gw.rt.js, "consumer_info", broken)
    answer = await gw.client.get("/api/health", headers=gw.auth)
    assert answer.status_code == 200
    assert secret_reason not in answer.text
    assert answer.json()["dead_letters"]["error"].startswith("unavailable")
    assert all(q["error"].startswith("unavailable") for q in answer.json()["queues"])


async def test_config_redacts_secrets_and_carries_the_audit(gw: Gateway) -> None:
    answer = await gw.client.get("/api/config", headers=gw.auth)
    assert answer.status_code == 200, answer.text
    assert gw.token not in answer.text
    assert "pa55word-in-url" not in answer.text
    body = answer.json()
    assert body["view"] == "gateway"
    settings = {s["env"]: s for s in body["settings"]}
    assert settings["SB_GATEWAY_TOKEN"]["value"] == "**********"
    assert settings["SB_GATEWAY_TOKEN"]["secret"] is True
    assert settings["SB_GATEWAY_TOKEN"]["default"] is False
    assert settings["SB_SLACK_BOT_TOKEN"]["value"] == ""  # a secret not set: empty
    assert settings["SB_A2A_PUBLIC_URL"]["value"] == "https://agent:**********@example.com/a2a"
    # The test's NATS URL carries the admin's password: redacted too.
    nats_password = gw.settings.nats_url.split("://")[1].split("@")[0].split(":")[1]
    assert nats_password not in answer.text
    assert settings["SB_NATS_URL"]["value"] == gw.settings.nats_url.replace(
        nats_password, "**********"
    )
    assert settings["SB_HTTP_PORT"]["default"] is True
    assert body["audit"], "the audit's findings"
    assert {f["severity"] for f in body["audit"]} <= {"critical", "warning", "ok"}
    assert all(set(f) == {"severity", "check", "detail", "fix"} for f in body["audit"])
    assert json.dumps(body).count("**********") >= 1
