"""WebChat's abort end to end: every service as a real process, a model that streams its answer
slowly; ``abort`` on the socket interrupts the session's run (it ends ``interrupted``, not
with the model's full answer) and the session takes the next message as usual."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from websockets.asyncio.client import connect

from switchboard.v1 import messages_pb2
from tests.fakes.llm import FakeLLM, text_only
from tests.support.services import ServiceProcesses, with_fake_model

SLOW_ANSWER = " ".join(f"word{i}" for i in range(40))


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    with with_fake_model(tmp_path, nats_url, database_url, text_only(SLOW_ANSWER), {}) as procs:
        llm: FakeLLM = procs.llm  # type: ignore[attr-defined]
        llm.text_chunks = 40
        llm.stream_delay_s = 0.5  # about 20 s for the whole answer
        yield procs


async def scenario(services: ServiceProcesses) -> list[messages_pb2.AgentEvent]:
    ends: asyncio.Queue[messages_pb2.AgentEvent] = asyncio.Queue()
    started = asyncio.Event()

    async def on_event(msg: Any) -> None:
        event = messages_pb2.AgentEvent.FromString(msg.data)
        if event.stream == "lifecycle" and event.phase == "start":
            started.set()
        if event.stream == "lifecycle" and event.phase == "end":
            ends.put_nowait(event)

    nc = await nats.connect(services.nats_url)
    await nc.subscribe("sb.events.>", cb=on_event)
    ws_url = services.url.replace("http://", "ws://") + "/webchat/ws"
    try:
        async with connect(ws_url) as ws:
            ids = iter(range(1, 100))

            async def request(method: str, **params: Any) -> dict[str, Any]:
                rid = f"r{next(ids)}"
                await ws.send(
                    json.dumps({"type": "req", "id": rid, "method": method, "params": params})
                )
                while True:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
                    if frame.get("type") == "res" and frame.get("id") == rid:
                        return dict(frame)

            assert (await request("connect", token=services.token, session="abortme"))["ok"]
            assert (await request("send", text="tell me everything"))["ok"]
            await asyncio.wait_for(started.wait(), 60)
            aborted = await request("abort")
            assert aborted["ok"], aborted
            first = await asyncio.wait_for(ends.get(), 60)
            started.clear()
            services.llm.stream_delay_s = 0.0  # type: ignore[attr-defined]
            assert (await request("send", text="and now briefly"))["ok"]
            second = await asyncio.wait_for(ends.get(), 90)
    finally:
        await nc.close()
    return [first, second]


def test_abort_interrupts_the_run_and_the_session_goes_on(services: ServiceProcesses) -> None:
    first, second = asyncio.run(scenario(services))
    assert first.stop_reason == "interrupted"
    assert SLOW_ANSWER not in first.text  # the model's answer never finished
    assert second.session_key == first.session_key
    assert second.stop_reason != "interrupted"
    assert second.text.strip().endswith("word39")  # the next message was answered in full
