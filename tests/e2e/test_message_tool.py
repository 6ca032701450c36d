"""The agent's ``message`` tool end to end, every service a real process against a fake model:
a run on a chat channel sends a message to its chat before its reply (both on OUTBOUND, the
tool's part under its own run id), and a run without a chat (the HTTP API, as scheduled work
would be) reaches a named target of SB_MESSAGE_TARGETS, or gets a readable refusal.

One system for the module: each test its own sessions, reads the OUTBOUND parts that appeared
during it, and sees the fake model's calls reset."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import nats
import pytest

from switchboard import bus
from switchboard.v1 import messages_pb2
from tests.e2e import helpers
from tests.e2e.helpers import final_text, wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model
from tests.support.streams import outbound_parts

SUBJECTS = bus.Subjects()
OPS = {"ops": {"channel": "telegram", "chat_id": "-100777", "chat_type": "group"}}


def script(req: FakeRequest) -> Reply:
    """``say: <text>`` messages the current chat, ``tell ops: <text>`` the ops target; after
    the tool result, the answer quotes it."""
    if req.last_tool_results:
        return Reply(text="done: " + " | ".join(req.last_tool_results))
    text = req.last_user_text
    if text.startswith("say: "):
        return Reply(tool_calls=[("message", {"text": text[5:]})])
    if text.startswith("tell ops: "):
        return Reply(tool_calls=[("message", {"text": text[10:], "to": "ops"})])
    return Reply(text="hello")


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    env = {"SB_MESSAGE_TARGETS": json.dumps(OPS)}
    home = tmp_path_factory.mktemp("message-tool")
    with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    fresh_model(system)
    return system


def parts(url: str) -> list[tuple[str, messages_pb2.OutboundMessage]]:
    async def read() -> list[tuple[str, messages_pb2.OutboundMessage]]:
        nc = await nats.connect(url)
        try:
            return await outbound_parts(nc.jetstream())
        finally:
            await nc.close()

    return asyncio.run(read())


def new_parts(
    url: str, before: list[tuple[str, messages_pb2.OutboundMessage]]
) -> list[tuple[str, messages_pb2.OutboundMessage]]:
    """The parts on OUTBOUND now that were not there ``before`` (other tests' stay there)."""
    return [p for p in parts(url) if p not in before]


def publish_dm(url: str, text: str, message_id: str) -> None:
    message = messages_pb2.InboundMessage(
        channel="telegram",
        account="default",
        sender="4242",
        chat=messages_pb2.ChatRef(id="4242", type="direct"),
        text=text,
        message_id=message_id,
        received_at_ms=int(time.time() * 1000),
    )

    async def send() -> None:
        nc = await nats.connect(url)
        try:
            msg_id = f"telegram:default:{message_id}"
            await bus.js_publish(nc.jetstream(), SUBJECTS.inbound("telegram"), message, msg_id)
        finally:
            await nc.close()

    asyncio.run(send())


def test_a_chat_run_messages_its_chat_before_it_replies(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    before = parts(services.nats_url)
    publish_dm(services.nats_url, "say: heads up, the deploy starts now", "mt-1")

    def found_both() -> list[tuple[str, messages_pb2.OutboundMessage]] | None:
        found = new_parts(services.nats_url, before)
        return found if len(found) >= 2 else None

    found = wait_for(found_both)
    (tool_id, tool_part), (reply_id, reply) = found
    assert tool_part.text == "heads up, the deploy starts now"
    assert (tool_part.channel, tool_part.chat.id, tool_part.parts) == ("telegram", "4242", 1)
    assert tool_part.run_id.startswith("run_") and ":message:call_" in tool_part.run_id
    assert tool_id == f"{tool_part.run_id}:0"
    assert tool_part.session_key == "main:telegram:4242"
    # The run's own reply follows, under the run's id, quoting the tool's result.
    assert reply.run_id == tool_part.run_id.split(":message:")[0]
    assert reply_id == f"{reply.run_id}:0"
    assert reply.text == "done: sent to telegram chat 4242"
    assert "message" in llm.calls[0].request.tools


def test_a_run_without_a_chat_reaches_a_named_target(services: ServiceProcesses) -> None:
    key = "main:api:nightly"
    before = parts(services.nats_url)
    with helpers.client(services.url, services.token) as c:
        r = c.post(f"/api/sessions/{key}/messages", json={"text": "tell ops: nightly job done"})
        assert r.status_code in (200, 202), r.text
        assert wait_for(lambda: final_text(c, key)) == "done: sent to telegram chat -100777"
        [(_, part)] = new_parts(services.nats_url, before)
        assert (part.chat.id, part.chat.type, part.text) == ("-100777", "group", "nightly job done")

        other = "main:api:nochat"
        c.post(f"/api/sessions/{other}/messages", json={"text": "say: hello?"})
        text = wait_for(lambda: final_text(c, other))
        assert "has no chat to send to" in text and "ops" in text
        assert len(new_parts(services.nats_url, before)) == 1  # the refusal sent nothing
