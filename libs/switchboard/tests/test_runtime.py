"""ServiceRuntime against a real nats-server (and PostgreSQL): consumers, shutdown order,
readiness, the database and the gRPC server."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import httpx
import nats
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nats.aio.msg import Msg
from prometheus_client import REGISTRY

from switchboard import bus, registry, rpc
from switchboard.errors import ConfigError, DependencyUnavailable
from switchboard.runtime import ServiceRuntime, Stopped, service_ready
from switchboard.settings import CommonSettings, RpcSettings
from switchboard.v1 import messages_pb2, sessions_pb2, sessions_pb2_grpc
from switchboard_agent.config import AgentSettings
from switchboard_agent.migrations import MIGRATIONS, SCHEMA

Inbound = messages_pb2.InboundMessage
SESSIONS = "switchboard.v1.Sessions"


TOKEN = "runtime-test-token-0123456789"


class RpcTestSettings(CommonSettings, RpcSettings):
    pass


def settings_for(nats_url: str, **environ: str) -> CommonSettings:
    return CommonSettings.from_environ(
        {"SB_NATS_URL": nats_url, "SB_OPS_HOST": "127.0.0.1", **environ}
    )


async def eventually(predicate: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def undecodable(consumer: str) -> float:
    value = REGISTRY.get_sample_value("sb_bus_undecodable_total", {"consumer": consumer})
    return value or 0.0


async def publish(nats_url: str, *payloads: bytes, subject: str = "sb.inbound.api") -> list[int]:
    """Publish raw payloads from another connection (as the gateway would); their sequences."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        return [(await js.publish(subject, data)).seq for data in payloads]
    finally:
        await nc.close()


def inbound(text: str) -> bytes:
    return Inbound(channel="api", text=text, message_id=text).SerializeToString()


async def test_consume_delivers_decoded_payloads(nats_url: str) -> None:
    stop = asyncio.Event()
    got: list[tuple[str, str]] = []

    async def handle(msg: Msg, message: Inbound) -> None:
        assert isinstance(message, Inbound)
        got.append((msg.subject, message.text))
        await msg.ack()

    async with ServiceRuntime(registry.get("router"), settings_for(nats_url), stop) as rt:
        await rt.consume("INBOUND", "router", "sb.inbound.>", Inbound, handle, concurrency=2)
        await publish(nats_url, inbound("one"), inbound("two"), inbound("three"))

        async def all_handled() -> bool:
            return len(got) == 3

        assert await eventually(all_handled)
        stop.set()
    assert sorted(got) == [("sb.inbound.api", t) for t in ("one", "three", "two")]


async def test_undecodable_message_is_terminated_and_counted(nats_url: str) -> None:
    stop = asyncio.Event()
    got: list[str] = []
    before = undecodable("router-bad")

    async def handle(msg: Msg, message: Inbound) -> None:
        got.append(message.text)
        await msg.ack()

    async with ServiceRuntime(registry.get("router"), settings_for(nats_url), stop) as rt:
        terminated = await rt.nc.subscribe(
            "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.INBOUND.router-bad"
        )
        await rt.consume(
            "INBOUND", "router-bad", "sb.inbound.>", Inbound, handle, concurrency=1, ack_wait=2
        )
        # a length-delimited field 1 claiming 5 bytes with 2 left: not an InboundMessage
        bad_seq, _ = await publish(nats_url, b"\x0a\x05ab", inbound("after"))

        advisory = json.loads((await terminated.next_msg(timeout=30)).data)
        assert advisory["stream_seq"] == bad_seq
        assert advisory["deliveries"] == 1

        async def after_handled() -> bool:
            return got == ["after"]

        assert await eventually(after_handled), got
        assert undecodable("router-bad") == before + 1

        async def settled() -> bool:
            # the handler's ack is a plain publish: the server may count it a moment later
            info = await rt.js.consumer_info("INBOUND", "router-bad")
            return info.num_ack_pending == 0 and info.num_pending == 0

        assert await eventually(settled)  # nothing left to redeliver
        info = await rt.js.consumer_info("INBOUND", "router-bad")
        assert info.num_redelivered == 0
        stop.set()
    assert got == ["after"]  # the handler never saw the undecodable message


async def test_stopping_drains_in_flight_handler_before_nats_closes(nats_url: str) -> None:
    stop = asyncio.Event()
    started, release = asyncio.Event(), asyncio.Event()
    acks: list[object] = []
    runtimes: list[ServiceRuntime] = []

    async def handle(msg: Msg, message: Inbound) -> None:
        started.set()
        await release.wait()
        try:
            await msg.ack_sync(timeout=10)  # needs the connection: fails once NATS closed
            acks.append("acked")
        except Exception as exc:
            acks.append(exc)

    async def service() -> None:
        async with ServiceRuntime(registry.get("router"), settings_for(nats_url), stop) as rt:
            runtimes.append(rt)
            await rt.consume("INBOUND", "router", "sb.inbound.>", Inbound, handle, concurrency=1)
            await rt.wait_stopped()

    task = asyncio.create_task(service())

    async def has_runtime() -> bool:
        return bool(runtimes) or task.done()

    assert await eventually(has_runtime)
    await publish(nats_url, inbound("slow"))
    await asyncio.wait_for(started.wait(), 30)
    rt = runtimes[0]
    stop.set()

    async def shutting_down() -> bool:
        return not (await rt.readiness.evaluate())["started"]

    assert await eventually(shutting_down)

    async def nats_closed() -> bool:
        return rt.nc.is_closed

    # give a shutdown that does not wait for the handler time to close NATS under it
    closed_early = await eventually(nats_closed, timeout=2.0)
    assert not closed_early, "NATS closed while a handler was still in flight"
    assert not task.done()
    release.set()
    await asyncio.wait_for(task, 60)
    assert acks == ["acked"]
    assert rt.nc.is_closed

    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().consumer_info("INBOUND", "router")
        assert info.num_ack_pending == 0 and info.num_pending == 0
    finally:
        await nc.close()


async def test_started_only_while_waiting_for_stop(nats_url: str) -> None:
    stop = asyncio.Event()
    async with ServiceRuntime(registry.get("router"), settings_for(nats_url), stop) as rt:
        assert rt.ops is not None
        ops = f"http://127.0.0.1:{rt.ops.port}"
        assert await rt.readiness.evaluate() == {"nats": True, "started": False}
        async with httpx.AsyncClient(base_url=ops) as client:
            assert (await client.get("/readyz")).status_code == 503
            with pytest.raises(DependencyUnavailable, match="started"):
                await service_ready(rt.nc, rt.subjects, "router", timeout=10)

            waiting = asyncio.create_task(rt.wait_stopped())

            async def started() -> bool:
                return (await rt.readiness.evaluate())["started"]

            assert await eventually(started)
            assert await service_ready(rt.nc, rt.subjects, "router", timeout=10)
            ready = await client.get("/readyz")
            assert ready.status_code == 200
            assert ready.json()["checks"] == {"nats": True, "started": True}
            health = json.loads((await rt.nc.request("sb.health.router", b"", timeout=10)).data)
            assert health["service"] == "router" and health["instance"] == "router"

            stop.set()
            await asyncio.wait_for(waiting, 30)
            assert (await rt.readiness.evaluate())["started"] is False


async def test_instance_and_subject_prefix(nats_url: str) -> None:
    stop = asyncio.Event()
    settings = settings_for(nats_url, SB_INSTANCE="router-7", SB_SUBJECT_PREFIX="t9")
    async with ServiceRuntime(registry.get("router"), settings, stop) as rt:
        assert rt.instance == "router-7"
        names = {s.config.name for s in await rt.js.streams_info()}
        assert "T9_INBOUND" in names
        reply = json.loads((await rt.nc.request("t9.health.router", b"", timeout=10)).data)
        assert reply["instance"] == "router-7"


async def test_database_migrates_and_reports_postgres_ready(
    nats_url: str, database_url: str
) -> None:
    stop = asyncio.Event()
    settings = AgentSettings.from_environ(
        {"SB_NATS_URL": nats_url, "SB_DATABASE_URL": database_url, "SB_OPS_HOST": "127.0.0.1"}
    )
    async with ServiceRuntime(registry.get("agent"), settings, stop) as rt:
        assert "postgres" not in rt.readiness.checks
        pool = await rt.database(SCHEMA, MIGRATIONS)
        assert (await rt.readiness.evaluate(timeout=10))["postgres"] is True
        rows = await pool.fetch(f"SELECT version FROM {SCHEMA}.schema_migrations ORDER BY 1")
        assert [r["version"] for r in rows] == [m.version for m in MIGRATIONS]
    # stopping the service closed its pool: postgres no longer counts as ready
    assert (await rt.readiness.evaluate(timeout=10))["postgres"] is False


async def test_a_stop_ends_the_wait_for_a_database_that_is_not_up(nats_url: str) -> None:
    """Waiting for PostgreSQL at start-up (a minute at most) gives way to a stop: a service
    told to stop while its database is down ends at once instead of ignoring the stop."""
    stop = asyncio.Event()
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"postgresql://postgres@127.0.0.1:{closed.getsockname()[1]}/postgres"
    settings = AgentSettings.from_environ(
        {"SB_NATS_URL": nats_url, "SB_DATABASE_URL": url, "SB_OPS_HOST": "127.0.0.1"}
    )
    async with ServiceRuntime(registry.get("agent"), settings, stop) as rt:
        waiting = asyncio.create_task(rt.database(SCHEMA, MIGRATIONS))
        assert await eventually(lambda: _false(rt.readiness.evaluate))  # it waits, not ready
        assert not waiting.done()
        stop.set()
        with pytest.raises(Stopped, match="agent was told to stop while waiting for PostgreSQL"):
            await asyncio.wait_for(waiting, 10)  # far below the minute it would wait


async def _false(evaluate: Callable[[], Awaitable[dict[str, bool]]]) -> bool:
    return (await evaluate()).get("postgres") is False


async def test_database_needs_database_settings(nats_url: str) -> None:
    stop = asyncio.Event()
    async with ServiceRuntime(registry.get("router"), settings_for(nats_url), stop) as rt:
        with pytest.raises(ConfigError, match="CommonSettings has no database settings"):
            await rt.database(SCHEMA, MIGRATIONS)


class Sessions(sessions_pb2_grpc.SessionsServicer):
    async def List(
        self, request: sessions_pb2.ListSessionsRequest, context: Any
    ) -> sessions_pb2.ListSessionsResponse:
        return sessions_pb2.ListSessionsResponse()


async def _watch(ch: grpc.aio.Channel, service: str, statuses: list[int]) -> None:
    """Collect a Health.Watch stream's statuses until the server ends it."""
    call = health_pb2_grpc.HealthStub(ch).Watch(
        health_pb2.HealthCheckRequest(service=service), timeout=120
    )
    try:
        async for reply in call:
            statuses.append(reply.status)
    except grpc.aio.AioRpcError:
        pass  # the server stopped: the stream is closed


async def test_serve_grpc_serving_then_not_serving_and_closed(nats_url: str) -> None:
    stop = asyncio.Event()
    statuses: dict[str, list[int]] = {"": [], SESSIONS: []}
    settings = RpcTestSettings.from_environ(
        {"SB_NATS_URL": nats_url, "SB_OPS_HOST": "127.0.0.1", "SB_SERVICE_TOKEN": TOKEN}
    )
    async with ServiceRuntime(registry.get("agent"), settings, stop) as rt:
        servicer = rpc.Servicer(sessions_pb2_grpc.add_SessionsServicer_to_server, Sessions())
        server = await rt.serve_grpc("127.0.0.1", 0, servicer)
        assert server.port > 0
        ch = rpc.channel(f"127.0.0.1:{server.port}", TOKEN)
        assert await rpc.check_health(ch, timeout=10)
        assert await rpc.check_health(ch, SESSIONS, timeout=10)
        watchers = [asyncio.create_task(_watch(ch, name, got)) for name, got in statuses.items()]

        async def watching() -> bool:
            return all(statuses.values())

        assert await eventually(watching)
        stop.set()
    # leaving the block reported NOT_SERVING, then stopped the server (ending the streams)
    await asyncio.wait_for(asyncio.gather(*watchers), 60)
    serving, not_serving = (
        health_pb2.HealthCheckResponse.SERVING,
        health_pb2.HealthCheckResponse.NOT_SERVING,
    )
    for name, got in statuses.items():
        assert got == [serving, not_serving], (name, got)
    assert not await rpc.check_health(ch, timeout=2)
    await ch.close()


async def test_published_payload_round_trip_through_bus_helpers(nats_url: str) -> None:
    """js_publish (with trace headers) then the runtime's consumer decodes it."""
    stop = asyncio.Event()
    got: list[Inbound] = []

    async def handle(msg: Msg, message: Inbound) -> None:
        got.append(message)
        await msg.ack()

    async with ServiceRuntime(registry.get("router"), settings_for(nats_url), stop) as rt:
        await rt.consume(
            "INBOUND",
            "router",
            "sb.inbound.>",
            Inbound,
            handle,
            concurrency=1,
            track_backlog=False,
        )
        sent = Inbound(channel="telegram", account="bot", text="hey", message_id="9")
        await bus.js_publish(rt.js, rt.subjects.inbound("telegram"), sent, msg_id="telegram:bot:9")

        async def arrived() -> bool:
            return bool(got)

        assert await eventually(arrived)
    assert got == [sent]


async def test_serve_grpc_needs_a_service_token(nats_url: str) -> None:
    stop = asyncio.Event()
    settings = RpcTestSettings.from_environ({"SB_NATS_URL": nats_url, "SB_OPS_HOST": "127.0.0.1"})
    async with ServiceRuntime(registry.get("agent"), settings, stop) as rt:
        servicer = rpc.Servicer(sessions_pb2_grpc.add_SessionsServicer_to_server, Sessions())
        with pytest.raises(ConfigError, match="SB_SERVICE_TOKEN"):
            await rt.serve_grpc("127.0.0.1", 0, servicer)


async def test_serve_grpc_refuses_a_weak_service_token(nats_url: str) -> None:
    stop = asyncio.Event()
    environ = {"SB_NATS_URL": nats_url, "SB_OPS_HOST": "127.0.0.1", "SB_SERVICE_TOKEN": "change-me"}
    async with ServiceRuntime(
        registry.get("agent"), RpcTestSettings.from_environ(environ), stop
    ) as rt:
        servicer = rpc.Servicer(sessions_pb2_grpc.add_SessionsServicer_to_server, Sessions())
        with pytest.raises(ConfigError, match="SB_SERVICE_TOKEN is weak") as refused:
            await rt.serve_grpc("127.0.0.1", 0, servicer)
        assert "change-me" not in str(refused.value)
