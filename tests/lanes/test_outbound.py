"""Replies on a chat channel go out as OUTBOUND parts with ``Nats-Msg-Id = <run id>:<part>``;
a replayed inbound message (past the INBOUND dedupe) neither runs again nor replies twice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy

from switchboard import bus
from switchboard.sessions import session_token
from switchboard.v1 import messages_pb2
from tests.fakes.llm import FakeLLM, text_only
from tests.lanes.pipeline import wait_settled
from tests.support.services import ServiceProcesses, with_fake_model
from tests.support.streams import outbound_parts as stored_parts

LONG = " ".join(f"Sentence number {i} of a long reply." for i in range(80))  # ~2.8k chars


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    env = {"SB_LOG_LEVEL": "INFO"}
    with with_fake_model(tmp_path, nats_url, database_url, text_only(LONG), env) as procs:
        yield procs


def inbound(message_id: str) -> messages_pb2.InboundMessage:
    return messages_pb2.InboundMessage(
        channel="webhook",
        account="acct-1",
        sender="user-7",
        chat=messages_pb2.ChatRef(id="user-7", type="direct"),
        text="tell me a long story",
        message_id=message_id,
        received_at_ms=int(time.time() * 1000),
        session_key="main:webhook:user-7",
        agent="main",
    )


async def outbound_parts(js: JetStreamContext) -> list[tuple[str, str]]:
    """(Nats-Msg-Id, run id) of every OUTBOUND message, read without consuming them."""
    return [(msg_id, part.run_id) for msg_id, part in await stored_parts(js)]


async def wait_log(path: Path, text: str, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in await asyncio.to_thread(path.read_text, errors="replace"):
            return True
        await asyncio.sleep(0.2)
    return False


async def scenario(url: str, llm: FakeLLM, log: Path) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await bus.js_publish(js, "sb.inbound.webhook", inbound("m-1"), msg_id="webhook:acct-1:m-1")
        # The lane delivery is acked once the run is committed and all its parts are out: a
        # second copy of the run or of a part would be on the stream by then.
        await wait_settled(js)
        first = await outbound_parts(js)
        run_ids = {run for _, run in first}
        assert len(run_ids) == 1 and len(first) >= 3, first  # one run, several parts
        [run_id] = run_ids
        assert [mid for mid, _ in first] == [f"{run_id}:{i}" for i in range(len(first))]
        calls = len(llm.calls)

        # The same platform message again, as a retransmit after the INBOUND dedupe window...
        await bus.js_publish(js, "sb.inbound.webhook", inbound("m-1"), msg_id="late-retry")
        # ...and as a lane item replayed past the LANES dedupe window: the agent finds the
        # committed run, publishes its parts again, and the OUTBOUND dedupe drops them.
        item = messages_pb2.LaneItem(
            session_key="main:webhook:user-7", agent="main", message=inbound("m-1")
        )
        lane = bus.Subjects().lane("main", session_token("main:webhook:user-7"))
        await bus.js_publish(js, lane, item, msg_id="replayed-lane-item")
        # Both routed, and the replayed item acked (after its republish): only then look.
        await wait_settled(js)
        assert await outbound_parts(js) == first  # nothing new
        assert await wait_log(log, "outbound parts already published")  # but it did republish
        assert len(llm.calls) == calls  # and the run was not repeated

        sub = await js.pull_subscribe(
            "sb.outbound.webhook.acct-1",
            "test-reader",
            config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL),
        )
        msgs = await sub.fetch(10, timeout=5)
        texts = []
        for m in msgs:
            part = messages_pb2.OutboundMessage()
            part.ParseFromString(m.data)
            assert part.parts == len(first) and part.chat.id == "user-7"
            texts.append(part.text)
        assert all(len(t) <= 1000 for t in texts)
        assert " ".join(texts).split() == LONG.split()
    finally:
        await nc.close()


def test_outbound_parts_exactly_once(services: ServiceProcesses) -> None:
    log = services.home / "logs" / "agent.log"
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    asyncio.run(scenario(services.env["SB_NATS_URL"], llm, log))
