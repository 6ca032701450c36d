"""The agent's tool loop against the real services: SB_MAX_ITERATIONS stops a model that never
stops asking for tools, and the tool calls of one model response run concurrently. One system
for the module: each test its own session, the fake model's calls reset before each."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import nats
import pytest

from switchboard import bus
from switchboard.v1 import messages_pb2
from tests.e2e.helpers import EventTap, client, history, run_rows
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.services import ServiceProcesses, with_fake_model
from tests.support.streams import outbound_parts

MAX_ITERATIONS = 2
# What the runner appends when it stops the loop (runner.py builds it inline).
STOP_NOTE = f"[stopped after {MAX_ITERATIONS} model calls]"
HANDSHAKE_S = 40  # how long each parallel call waits for its twin before giving up


def handshake(me: str, peer: str) -> str:
    """A sandboxed shell command that creates ``me`` and waits (bounded) for ``peer``: two of
    them only both succeed when they run at the same time."""
    rounds = HANDSHAKE_S * 10
    return (
        f"touch {me}; i=0; "
        f"while [ ! -e {peer} ] && [ $i -lt {rounds} ]; do sleep 0.1; i=$((i+1)); done; "
        f"if [ -e {peer} ]; then echo {me} saw {peer}; else echo {peer} never came; exit 1; fi"
    )


def script(req: FakeRequest) -> Reply:
    """``loop``: always a tool call (with a line of text naming the step); ``parallel <tag>``:
    two handshaking exec calls in one response, then an answer quoting both results."""
    steps = sum(1 for m in req.messages if m.get("role") == "tool")
    if req.last_user_text.startswith("parallel "):
        if req.last_tool_results:
            return Reply(text="both: " + " | ".join(req.last_tool_results))
        tag = req.last_user_text.split()[1]
        a, b = f"{tag}-a.flag", f"{tag}-b.flag"
        return Reply(
            tool_calls=[
                ("exec", {"command": handshake(a, b), "timeout_s": 60}),
                ("exec", {"command": handshake(b, a), "timeout_s": 60}),
            ]
        )
    return Reply(text=f"step {steps + 1}", tool_calls=[("get_time", {"timezone": "UTC"})])


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    env = {
        "SB_MAX_ITERATIONS": str(MAX_ITERATIONS),
        "SB_LOG_LEVEL": "INFO",
        "SB_EXEC_MODE": "sandbox",  # the handshakes are shell lines
    }
    home = tmp_path_factory.mktemp("agent-loop")
    with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    """The module's system, its fake model's recorded calls cleared for this test."""
    system.llm.reset()  # type: ignore[attr-defined]
    return system


def test_iteration_limit_stops_the_loop(services: ServiceProcesses) -> None:
    """SB_MAX_ITERATIONS=2 and a model that always asks for a tool: exactly 2 model calls, the
    reply ends with the runner's stop note, and the run's stop reason is max_iterations."""
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    peer = f"loop-{uuid.uuid4().hex[:8]}"
    key = f"main:openai:{peer}"
    events = EventTap(services.url, services.token, key)
    try:
        with client(services.url, services.token) as c:
            r = c.post(
                "/v1/chat/completions",
                json={"model": "switchboard", "messages": [{"role": "user", "content": "loop"}]},
                headers={"X-Switchboard-Session": peer},
                timeout=120,
            )
            assert r.status_code == 200, r.text
            reply = r.json()["choices"][0]["message"]["content"]
            end = events.wait("lifecycle", "end")
            messages = history(c, key)
    finally:
        events.close()
    # Two model calls (each answered with a tool call), then the loop stopped: a third call
    # would have come before the run's end event.
    assert len(llm.calls) == MAX_ITERATIONS
    assert all(call.reply.tool_calls for call in llm.calls)
    assert reply == f"step 1\n\nstep 2{STOP_NOTE}"
    assert end["stop_reason"] == "max_iterations"
    assert end["text"] == reply
    assert len(events.find("tool", "result", tool="get_time")) == MAX_ITERATIONS
    assert messages[-1]["role"] == "assistant"
    assert messages[-1]["content"] == [{"type": "text", "text": STOP_NOTE}]
    [run] = run_rows(services.env["SB_DATABASE_URL"], key)
    assert (run["status"], run["stop_reason"], run["iterations"]) == (
        "completed",
        "max_iterations",
        MAX_ITERATIONS,
    )


def webhook_message(session_key: str, message_id: str) -> messages_pb2.InboundMessage:
    return messages_pb2.InboundMessage(
        channel="webhook",
        account="acct-1",
        sender="user-9",
        chat=messages_pb2.ChatRef(id="user-9", type="direct"),
        text="loop",
        message_id=message_id,
        received_at_ms=int(time.time() * 1000),
        session_key=session_key,
        agent="main",
    )


def test_iteration_limit_reply_on_a_chat_channel(services: ServiceProcesses) -> None:
    """On a chat channel the OUTBOUND reply is the streamed text with the stop note."""
    key = "main:webhook:user-9"
    nats_url = services.env["SB_NATS_URL"]
    events = EventTap(services.url, services.token, key)
    try:

        async def publish() -> None:
            nc = await nats.connect(nats_url)
            try:
                message = webhook_message(key, "m-loop")
                await bus.js_publish(
                    nc.jetstream(), "sb.inbound.webhook", message, msg_id="webhook:acct-1:m-loop"
                )
            finally:
                await nc.close()

        asyncio.run(publish())
        end = events.wait("lifecycle", "end", timeout=60)
    finally:
        events.close()
    assert end["stop_reason"] == "max_iterations"
    streamed = end["text"]
    assert streamed == f"step 1\n\nstep 2{STOP_NOTE}"

    async def parts() -> list[messages_pb2.OutboundMessage]:
        nc = await nats.connect(nats_url)
        try:
            return [p for _, p in await outbound_parts(nc.jetstream()) if p.run_id == end["run_id"]]
        finally:
            await nc.close()

    # The parts are published before the run's end event.
    sent = asyncio.run(parts())
    assert sent, "no OUTBOUND reply"
    assert "".join(p.text for p in sent) == streamed


def test_tool_calls_of_one_response_run_concurrently(services: ServiceProcesses) -> None:
    """Two exec calls in one model response, each creating its own file and then waiting for
    the other's: both only succeed if the agent and the executor run them at the same time."""
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    key = "main:api:parallel"
    tag = uuid.uuid4().hex[:8]
    events = EventTap(services.url, services.token, key)
    try:
        with client(services.url, services.token) as c:
            r = c.post(f"/api/sessions/{key}/messages", json={"text": f"parallel {tag}"})
            assert r.status_code == 202, r.text
            end = events.wait("lifecycle", "end", timeout=HANDSHAKE_S * 2 + 30)
            messages = history(c, key)
    finally:
        events.close()
    a, b = f"{tag}-a.flag", f"{tag}-b.flag"
    results = events.find("tool", "result", tool="exec")
    assert [(e["text"], e["data"]["is_error"]) for e in results] == [
        (f"{a} saw {b}\n", False),
        (f"{b} saw {a}\n", False),
    ], results
    assert len(llm.calls) == 2  # one response with both calls, one answer after them
    assert len(llm.calls[0].reply.tool_calls) == 2
    assert llm.calls[1].request.last_tool_results == [f"{a} saw {b}\n", f"{b} saw {a}\n"]
    assert end["text"] == f"both: {a} saw {b}\n | {b} saw {a}\n"
    # One assistant turn with both tool_use blocks, one user turn with both results.
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    uses = [b for b in messages[1]["content"] if b["type"] == "tool_use"]
    blocks = messages[2]["content"]
    assert [u["id"] for u in uses] == [r["tool_use_id"] for r in blocks]
    assert all(r["type"] == "tool_result" and r["is_error"] is False for r in blocks)
