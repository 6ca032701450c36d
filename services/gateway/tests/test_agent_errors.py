"""gRPC errors of the agent reach HTTP callers only as text the agent wrote for them: its
refusals (invalid argument, unknown approval or tool, policy) pass through; anything else (an
exception's message with a host path, gRPC's own text, a refused service credential) is
logged and answered with a fixed message. Against the real agent (its gRPC servers on a real
PostgreSQL), hosted in this process as ``switchboard serve`` hosts it."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

from switchboard import host, registry
from switchboard.embedded import free_port
from tests.support.servers import service_nats_env

from .gateway_harness import Gateway, started

AGENT_DOWN = "The agent service is not available; try again shortly."
SECRET_PATH = "/srv/pg-data/base/16384/2619"
# What PostgreSQL says when a data file cannot be read; raised by a function the test puts
# under the agent's transcript table.
FAILING_READ = f"""
ALTER TABLE agent.messages RENAME TO messages_kept;
CREATE FUNCTION agent.failing_read() RETURNS SETOF agent.messages_kept LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'could not open file "{SECRET_PATH}": Permission denied';
END $$;
CREATE VIEW agent.messages AS SELECT * FROM agent.failing_read();
ALTER TABLE agent.sessions RENAME TO sessions_kept;
CREATE FUNCTION agent.failing_sessions() RETURNS SETOF agent.sessions_kept LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'could not open file "{SECRET_PATH}": Permission denied';
END $$;
CREATE VIEW agent.sessions AS SELECT * FROM agent.failing_sessions();
"""
# Both tables fail: the history query joins them, and PostgreSQL may read either one first
# (an empty sessions table alone would end the join before a message is read).


@asynccontextmanager
async def agent(nats_url: str, database_url: str, home: Path, token: str) -> AsyncIterator[str]:
    """The agent service with its gRPC servers on a free loopback port; that address."""
    port = free_port()
    environ = {
        **service_nats_env(nats_url, "agent"),
        "SB_HOME": str(home),
        "SB_DATABASE_URL": database_url,
        "SB_SERVICE_TOKEN": token,
        "SB_AGENT_GRPC_HOST": "127.0.0.1",
        "SB_AGENT_GRPC_PORT": str(port),
        "SB_OPS_HOST": "127.0.0.1",
        "SB_OPS_PORT": "0",
        "SB_LOG_JSON": "false",
    }
    stop = asyncio.Event()
    task = asyncio.create_task(host.run_service(host.Hosted(registry.get("agent"), environ), stop))
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)


async def until_served(gw: Gateway, timeout: float = 60.0) -> None:
    """The agent answers the gateway (its gRPC servers listen)."""
    async with asyncio.timeout(timeout):
        while True:
            if (await gw.client.get("/api/approvals", headers=gw.auth)).status_code == 200:
                return
            await asyncio.sleep(0.1)


@pytest.fixture
async def system(
    nats_url: str, database_url: str, tmp_path: Path
) -> AsyncIterator[tuple[Gateway, str, str]]:
    """The gateway (it creates the NATS streams) and the agent; also the agent's address and
    the service token they share."""
    token = secrets.token_urlsafe(32)
    async with (
        agent(nats_url, database_url, tmp_path / "agent", token) as addr,
        started(nats_url, tmp_path / "gw", agent_addr=addr, service_token=token) as gw,
    ):
        await until_served(gw)
        yield gw, addr, token


def error_of(body: dict[str, object]) -> dict[str, object]:
    error = body["error"]
    assert isinstance(error, dict)
    return error


async def test_the_agents_own_refusals_reach_the_caller(system: tuple[Gateway, str, str]) -> None:
    gw, _, _ = system
    response = await gw.client.patch(
        "/api/sessions/main:api:alice", json={"tool_policy": {"color": "red"}}, headers=gw.auth
    )
    assert response.status_code == 400, response.text
    assert error_of(response.json())["message"] == (
        "invalid tool policy: tool_policy: unknown key(s) color; expected profile, allow, deny"
    )
    response = await gw.client.post("/tools/invoke", json={"tool": "nope"}, headers=gw.auth)
    assert response.status_code == 404, response.text
    error = error_of(response.json())
    assert (error["message"], error["code"]) == ("no tool 'nope'", "unknown_tool")
    response = await gw.client.patch(
        "/api/sessions/main:api:bob", json={"tool_policy": {"deny": ["get_time"]}}, headers=gw.auth
    )
    assert response.status_code == 200, response.text
    response = await gw.client.post(
        "/tools/invoke", json={"tool": "get_time", "sessionKey": "main:api:bob"}, headers=gw.auth
    )
    assert response.status_code == 403, response.text
    error = error_of(response.json())
    assert error["code"] == "policy_denied" and "get_time" in str(error["message"])
    response = await gw.client.post(
        "/api/approvals/ap-none", json={"decision": "approve"}, headers=gw.auth
    )
    assert response.status_code == 404, response.text
    assert error_of(response.json())["code"] == "approval_not_found"


async def test_an_internal_error_of_the_agent_does_not_reach_the_caller(
    system: tuple[Gateway, str, str], database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The agent's transcript read fails with PostgreSQL's message naming a data file: the
    caller gets 503 and the fixed message; the agent answers INTERNAL with its own fixed text
    (the path never leaves it) and logs the failure, path included, once."""
    gw, _, _ = system
    caplog.set_level(logging.WARNING, "switchboard_gateway")
    caplog.set_level(logging.WARNING, "switchboard.errors_map")
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(FAILING_READ)
    finally:
        await conn.close()
    response = await gw.client.get("/api/sessions/main:api:alice/history", headers=gw.auth)
    assert response.status_code == 503, response.text
    assert error_of(response.json())["message"] == AGENT_DOWN
    for leak in (SECRET_PATH, "could not open", "Permission denied", "asyncpg", "Unexpected"):
        assert leak not in response.text, leak
    logged = [r.getMessage() for r in caplog.records if r.name == "switchboard_gateway.errors"]
    assert any("Sessions.History failed: INTERNAL: the agent failed" in x for x in logged), logged
    assert not any(SECRET_PATH in line for line in logged), logged
    agent_logged = [r for r in caplog.records if r.name == "switchboard.errors_map" and r.exc_info]
    assert len(agent_logged) == 1, [r.getMessage() for r in agent_logged]
    [record] = agent_logged
    assert record.getMessage() == "SessionsService.History failed"
    assert record.exc_info is not None and SECRET_PATH in str(record.exc_info[1])


async def test_a_refused_service_credential_does_not_reach_the_caller(
    system: tuple[Gateway, str, str],
    nats_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A gateway with the wrong service token: the agent refuses each call (UNAUTHENTICATED);
    callers get the fixed 503, the operator an error in the log. Even on the route whose
    refusals do pass through (tools/invoke), as the refusal is not the agent's tagged one."""
    _, addr, _ = system
    caplog.set_level(logging.WARNING, "switchboard_gateway")
    wrong = secrets.token_urlsafe(32)
    async with started(nats_url, tmp_path / "wrong", agent_addr=addr, service_token=wrong) as gw:
        for method, path, body in [
            ("GET", "/api/sessions/main:api:alice/history", None),
            ("GET", "/api/approvals", None),
            ("POST", "/tools/invoke", {"tool": "get_time"}),
        ]:
            response = await gw.client.request(method, path, json=body, headers=gw.auth)
            assert response.status_code == 503, (path, response.text)
            assert error_of(response.json())["message"] == AGENT_DOWN
            assert "credential" not in response.text
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any("UNAUTHENTICATED" in r.getMessage() for r in errors)


async def test_a_call_past_its_deadline_is_504_without_grpc_text(
    system: tuple[Gateway, str, str], database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """A tool invocation the agent cannot answer within SB_TOOL_INVOKE_TIMEOUT_S: the test
    holds a lock on the sessions table the agent reads first, so the call waits past it."""
    _, addr, token = system
    conn = await asyncpg.connect(database_url)
    try:
        async with (
            conn.transaction(),
            started(
                nats_url,
                tmp_path / "hasty",
                agent_addr=addr,
                service_token=token,
                tool_invoke_timeout_s=0.5,
            ) as gw,
        ):
            await conn.execute("LOCK TABLE agent.sessions IN ACCESS EXCLUSIVE MODE")
            response = await gw.client.post(
                "/tools/invoke", json={"tool": "get_time"}, headers=gw.auth
            )
    finally:
        await conn.close()
    assert response.status_code == 504, response.text
    assert error_of(response.json())["message"] == "The agent did not answer in time."
    assert "Deadline" not in response.text
