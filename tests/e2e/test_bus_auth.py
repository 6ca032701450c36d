"""Nothing but the gateway answers without credentials (issue 9, item 1), attacked for real:
NATS refuses a stranger, and a service's own user can do only what that service needs (the
gateway, router or executor cannot start a tool call; the gateway cannot listen to tool
results); the agent's gRPC refuses a caller without the service credential. The legitimate
paths keep working: the agent's user starts a tool call the real executor runs, the gateway
reaches the agent."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import nats
import pytest
from nats.aio.client import Client as NATS

from switchboard import bus
from switchboard.v1 import messages_pb2, sessions_pb2, sessions_pb2_grpc
from tests.fakes.llm import FakeRequest, Reply
from tests.support.servers import service_nats_env
from tests.support.services import ServiceProcesses, with_fake_model

SUBJECTS = bus.Subjects()


def script(req: FakeRequest) -> Reply:
    return Reply(text="hello")


@pytest.fixture(scope="module")
def services(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    """One system for the module: neither test changes it (the files the bus test writes and
    checks are its own)."""
    home = tmp_path_factory.mktemp("bus-auth")
    with with_fake_model(home, module_nats_url, module_database_url, script, {}) as procs:
        yield procs


async def connect_as(admin_url: str, user: str, errors: list[str]) -> NATS:
    env = service_nats_env(admin_url, user)

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    return await nats.connect(
        env["SB_NATS_URL"],
        user=env["SB_NATS_USER"],
        password=env["SB_NATS_PASSWORD"],
        inbox_prefix=bus.inbox_prefix(user),
        error_cb=on_error,
        allow_reconnect=False,
    )


def write_call(path: str) -> messages_pb2.ToolCall:
    return messages_pb2.ToolCall(
        call_id=f"call-{uuid.uuid4().hex[:12]}",
        run_id=f"run-{uuid.uuid4().hex[:12]}",
        agent="main",
        tool="write",
        args_json=json.dumps({"path": path, "content": "written over NATS\n"}),
        timeout_s=30,
    )


async def bus_attacks(admin_url: str, workspace: Path) -> None:
    plain = service_nats_env(admin_url, "gateway")["SB_NATS_URL"]
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(plain, allow_reconnect=False, max_reconnect_attempts=0)

    admin = await nats.connect(admin_url)
    try:
        tools_stream = SUBJECTS.stream("TOOLS")
        before = (await admin.jetstream().stream_info(tools_stream)).state.last_seq
        for user in ("gateway", "router", "tools"):
            errors: list[str] = []
            nc = await connect_as(admin_url, user, errors)
            try:
                with pytest.raises(nats.errors.TimeoutError):  # the server drops it: no ack
                    await bus.js_publish_ack(
                        nc.jetstream(),
                        SUBJECTS.tools_call("default"),
                        write_call("pwned.txt"),
                        timeout=3,
                    )
                if user == "gateway":  # nor may it listen to what tools return
                    await nc.subscribe(SUBJECTS.tools_result("*"))
                    await nc.flush()
                    await asyncio.sleep(0.5)  # the server's -ERR comes after the flush
            finally:
                await nc.close()
            assert any("permissions violation for publish" in e for e in errors), (user, errors)
            if user == "gateway":
                assert any("permissions violation for subscription" in e for e in errors)
        after = (await admin.jetstream().stream_info(tools_stream)).state.last_seq
        assert after == before, "a forbidden tool call reached the TOOLS stream"

        # The agent's user may: the real executor runs the call and answers.
        errors = []
        agent = await connect_as(admin_url, "agent", errors)
        try:
            call = write_call("legit.txt")
            results = await agent.subscribe(SUBJECTS.tools_result(call.run_id))
            await bus.js_publish_ack(agent.jetstream(), SUBJECTS.tools_call("default"), call)
            reply = await results.next_msg(timeout=60)
            result = messages_pb2.ToolResult.FromString(reply.data)
            assert not result.is_error, result.content
        finally:
            await agent.close()
        assert errors == []
    finally:
        await admin.close()
    assert (workspace / "legit.txt").read_text() == "written over NATS\n"
    assert not (workspace / "pwned.txt").exists()


def test_nats_refuses_strangers_and_what_a_service_may_not_do(services: ServiceProcesses) -> None:
    workspace = Path(services.env["SB_WORKSPACES_DIR"]) / "main"
    asyncio.run(bus_attacks(services.env["SB_NATS_URL"], workspace))


async def grpc_attacks(agent_addr: str) -> None:
    async with grpc.aio.insecure_channel(agent_addr) as ch:
        stub = sessions_pb2_grpc.SessionsStub(ch)
        for metadata in ((), (("authorization", "Bearer guessed-token"),)):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.List(sessions_pb2.ListSessionsRequest(), metadata=metadata, timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_agent_grpc_refuses_callers_without_the_service_credential(
    services: ServiceProcesses,
) -> None:
    asyncio.run(grpc_attacks(services.env["SB_AGENT_ADDR"]))
    # The gateway holds the credential: the same call through it works.
    r = httpx.get(
        f"{services.url}/api/sessions/main:api:grpc-probe/history",
        headers={"Authorization": f"Bearer {services.token}"},
    )
    assert r.status_code == 200, r.text
