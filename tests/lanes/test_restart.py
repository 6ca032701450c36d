"""NATS, then PostgreSQL, restarted under load: services reconnect, /readyz reports the outage
and the recovery, and every accepted message is answered exactly once, in order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from switchboard.embedded import NatsServer, Postgres
from tests.fakes.llm import FakeLLM, tool_then_text
from tests.lanes.test_scale import assert_exactly_once_in_order, wait_answered
from tests.support.services import ServiceProcesses


@pytest.fixture
def system(tmp_path: Path) -> Iterator[tuple[ServiceProcesses, NatsServer, Postgres, FakeLLM]]:
    with (
        FakeLLM(tool_then_text("get_time", {"timezone": "UTC"})) as llm,
        NatsServer(tmp_path / "nats") as nats_server,
        Postgres(tmp_path / "pg") as pg,
    ):
        env = {
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": f"{llm.base_url}/v1",
            "SB_DM_POLICY": "open",  # made-up chat senders (router security is tested apart)
        }
        services = ServiceProcesses(tmp_path / "home", nats_server.url, pg.uri, env)
        services.start()
        try:
            yield services, nats_server, pg, llm
        finally:
            services.stop()


async def post_wave(services: ServiceProcesses, sessions: list[str], index: int) -> None:
    """One message per session; a client retries while the gateway answers 503 (not accepted)."""
    headers = {"Authorization": f"Bearer {services.token}"}
    limits = httpx.Limits(keepalive_expiry=2.0)  # below uvicorn's 5 s keep-alive timeout
    async with httpx.AsyncClient(
        base_url=services.url, headers=headers, timeout=10, limits=limits
    ) as client:

        async def send(key: str) -> None:
            deadline = time.monotonic() + 60
            while True:
                try:
                    r = await client.post(
                        f"/api/sessions/{key}/messages", json={"text": f"{key}#{index}"}
                    )
                    if r.status_code == 202:
                        return
                    assert r.status_code == 503, r.text
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the gateway never accepted the message"
                await asyncio.sleep(0.2)

        await asyncio.gather(*(send(k) for k in sessions))


@pytest.mark.timeout(400)
def test_nats_then_postgres_restart_under_load(
    system: tuple[ServiceProcesses, NatsServer, Postgres, FakeLLM],
) -> None:
    services, nats_server, pg, llm = system
    sessions = [f"main:restart:{i}" for i in range(20)]
    asyncio.run(post_wave(services, sessions, 0))
    asyncio.run(post_wave(services, sessions, 1))

    nats_server.stop()
    assert services.wait_ready(False, 15), "/readyz stayed 200 with NATS down"
    nats_server.start()
    asyncio.run(post_wave(services, sessions, 2))
    assert services.wait_ready(True, 60), "/readyz did not recover after NATS came back"
    asyncio.run(post_wave(services, sessions, 3))

    pg.stop()
    assert services.wait_ready(False, 15), "/readyz stayed 200 with PostgreSQL down"
    pg.start()
    assert services.wait_ready(True, 60), "/readyz did not recover after PostgreSQL came back"
    asyncio.run(post_wave(services, sessions, 4))

    stack_like = _Adapter(services)
    transcripts = wait_answered(stack_like, llm, sessions, 5, timeout=240)  # type: ignore[arg-type]
    assert_exactly_once_in_order(transcripts, 5)


class _Adapter:
    """What wait_answered needs of a stack: its URL and token."""

    def __init__(self, services: ServiceProcesses) -> None:
        self.url = services.url
        self.token = services.token
