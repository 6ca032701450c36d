"""Lanes across replicas, on the real embedded stack with two agent processes: per-session
order, no overlap within a session, real overlap across sessions, every message answered once,
also when an agent replica is SIGKILLed mid-run."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import nats
import psutil
import pytest

from switchboard import bus
from switchboard.embedded import free_port
from switchboard.v1 import messages_pb2
from tests.fakes.llm import FakeLLM, RecordedCall, tool_then_text
from tests.lanes.pipeline import settle
from tests.support.stack import Stack, start_stack, stop_stack
from tests.support.streams import outbound_parts

SESSION = re.compile(r"Session: (\S+?)(?: \(|\. )")  # the runtime line of the prompt
LEAK_CANARY = "SB_TEST_LEAK_CANARY"  # set in this process while the stack starts


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(tool_then_text("get_time", {"timezone": "UTC"})) as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[Stack]:
    env = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": f"{llm.base_url}/v1",
        "SB_NATS_PORT": str(free_port()),  # known, so a test can publish as a channel would
        # The made-up senders of the "webhook" channel are admitted (a per-channel variable:
        # the launcher must pass it to the router, which reads it by pattern).
        "SB_WEBHOOK_DM_POLICY": "open",
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(LEAK_CANARY, "1")  # as a developer's own SB_* settings would be
        stack = start_stack(
            tmp_path_factory.mktemp("lanes"), env, args=["--scale", "agent=2", "--scale", "tools=2"]
        )
    plain = f"nats://127.0.0.1:{env['SB_NATS_PORT']}"
    stack.nats_url = stack.admin_nats_url(plain)  # type: ignore[attr-defined]
    yield stack
    left = stop_stack(stack)
    assert not left, f"processes left behind: {left}"


async def post_all(
    stack: Stack, sessions: list[str], per_session: int, channel: frozenset[str] = frozenset()
) -> None:
    """Each session posts its messages in order; all sessions at once, as fast as possible.
    Sessions in ``channel`` arrive as a chat channel would deliver them (straight on INBOUND,
    channel ``webhook``), so their replies go out as OUTBOUND parts."""
    headers = {"Authorization": f"Bearer {stack.token}"}
    # Idle connections are dropped before uvicorn's 5 s keep-alive timeout can close one under
    # a request that is being sent on it (which surfaces as httpx.ReadError).
    limits = httpx.Limits(max_connections=50, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, limits=limits) as client:
        nc = await nats.connect(stack.nats_url)  # type: ignore[attr-defined]
        js = nc.jetstream()

        async def one_session(key: str) -> None:
            for i in range(per_session):
                if key in channel:
                    message = inbound(key, f"{key}#{i}")
                    await bus.js_publish(js, "sb.inbound.webhook", message, msg_id=f"{key}#{i}")
                    continue
                await post_message(client, key, f"{key}#{i}")

        try:
            await asyncio.gather(*(one_session(k) for k in sessions))
        finally:
            await nc.close()


async def post_message(client: httpx.AsyncClient, key: str, text: str) -> None:
    """One message; a connection dropped under load (httpx.ReadError: seen once in CI, with
    two test workers) is retried with the same ``Idempotency-Key``, so it is queued once."""
    for attempt in range(3):
        try:
            r = await client.post(
                f"/api/sessions/{key}/messages",
                json={"text": text},
                headers={"Idempotency-Key": text},
            )
        except httpx.TransportError:
            if attempt == 2:
                raise
            continue
        assert r.status_code == 202, r.text
        return


def inbound(key: str, text: str) -> messages_pb2.InboundMessage:
    peer = key.rsplit(":", 1)[1]
    return messages_pb2.InboundMessage(
        channel="webhook",
        account="chaos",
        sender=peer,
        chat=messages_pb2.ChatRef(id=peer, type="direct"),
        text=text,
        message_id=text,
        session_key=key,
        agent="main",
    )


async def outbound_replies(stack: Stack) -> dict[str, list[tuple[str, int, int]]]:
    """Every OUTBOUND part (run id, part, parts) by the inbound message it answers."""
    nc = await nats.connect(stack.nats_url)  # type: ignore[attr-defined]
    try:
        replies: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
        for _, part in await outbound_parts(nc.jetstream()):
            for mid in part.message_ids:
                replies[mid].append((part.run_id, part.part, part.parts))
        return replies
    finally:
        await nc.close()


@dataclass
class Run:
    session: str
    text: str
    start: float
    end: float


def runs_by_session(calls: list[RecordedCall], finished: bool = False) -> Any:
    """Pair each run's first model call (no tool results yet) with its second one; with
    ``finished`` return just the list of completed runs."""
    open_runs: dict[str, Run] = {}
    runs: dict[str, list[Run]] = defaultdict(list)
    for call in sorted(calls, key=lambda c: c.start):
        match = SESSION.search(call.request.system)
        if not match or call.status != 200:
            continue
        key = match.group(1)
        if not call.request.last_tool_results:
            open_runs[key] = Run(key, call.request.last_user_text, call.start, call.end)
        elif key in open_runs:
            run = open_runs.pop(key)
            run.end = call.end
            runs[key].append(run)
    if finished:
        return [r for rs in runs.values() for r in rs]
    return runs


def wait_answered(
    stack: Stack, llm: FakeLLM, sessions: list[str], per_session: int, timeout: float
) -> dict[str, list]:
    """The transcripts, once every session holds its answered messages. Waits on the fake
    model's call count first (free), then reads each history (retrying briefly for commits)."""
    deadline = time.monotonic() + timeout
    runs = len(sessions) * per_session
    while time.monotonic() < deadline and len(runs_by_session(llm.calls, finished=True)) < runs:
        time.sleep(0.5)
    headers = {"Authorization": f"Bearer {stack.token}"}
    pending = set(sessions)
    transcripts: dict[str, list] = {}
    with httpx.Client(base_url=stack.url, headers=headers) as client:
        while pending and time.monotonic() < deadline + 10:
            for key in list(pending):
                messages = client.get(f"/api/sessions/{key}/history").json()["messages"]
                if sum(m["role"] == "assistant" for m in messages) >= 2 * per_session:
                    transcripts[key] = messages
                    pending.discard(key)
            if pending:
                time.sleep(0.5)
    assert not pending, f"{len(pending)} sessions not fully answered, e.g. {sorted(pending)[:3]}"
    return transcripts


def assert_exactly_once_in_order(transcripts: dict, per_session: int) -> None:
    for key, messages in transcripts.items():
        texts = [
            b["text"]
            for m in messages
            if m["role"] == "user"
            for b in m["content"]
            if b["type"] == "text"
        ]
        assert texts == [f"{key}#{i}" for i in range(per_session)], key
        finals = [
            m for m in messages if m["role"] == "assistant" and m["content"][0]["type"] == "text"
        ]
        assert len(finals) == per_session, key  # one reply per message, none twice


def test_the_stack_sees_only_the_settings_the_test_gives_it(stack: Stack) -> None:
    """tests/support/stack.py strips the test process's SB_* (and model) variables: a
    developer's SB_QUEUE_MODE or SB_MAX_ITERATIONS would change what these tests measure."""
    pids = {"launcher": stack.proc.pid, **stack.pids()}
    environs = {name: psutil.Process(pid).environ() for name, pid in pids.items()}
    assert environs["agent-0"].get("OPENAI_API_KEY") == "sk-test"  # the test's own env arrives
    leaked = sorted(name for name, environ in environs.items() if LEAK_CANARY in environ)
    assert not leaked, f"{LEAK_CANARY} from the test process reached {leaked}"


@pytest.mark.timeout(600)
def test_200_sessions_x_10_messages_on_two_replicas(stack: Stack, llm: FakeLLM) -> None:
    llm.reset()
    sessions = [f"main:stress:{i}" for i in range(200)]
    asyncio.run(post_all(stack, sessions, 10))
    transcripts = wait_answered(stack, llm, sessions, 10, timeout=400)
    assert_exactly_once_in_order(transcripts, 10)

    runs = runs_by_session(llm.calls)
    overlaps_across = 0
    all_runs = sorted((r for rs in runs.values() for r in rs), key=lambda r: r.start)
    for key in sessions:
        mine = runs[key]
        assert [r.text for r in mine] == [f"{key}#{i}" for i in range(10)], key
        for earlier, later in itertools.pairwise(mine):
            assert later.start >= earlier.end, f"{key}: runs overlap"
    for a, b in itertools.pairwise(all_runs):
        if a.session != b.session and b.start < a.end:
            overlaps_across += 1
    assert overlaps_across > 0, "different sessions never ran in parallel"


def test_sigkill_of_an_agent_replica_loses_and_duplicates_nothing(
    stack: Stack, llm: FakeLLM
) -> None:
    llm.reset()
    llm.stream_delay_s = 0.05  # runs take a while, so the kill lands mid-run
    try:
        sessions = [f"main:chaos:{i}" for i in range(40)]
        on_channel = frozenset(sessions[::2])
        asyncio.run(post_all(stack, sessions, 4, on_channel))
        llm.wait_for_calls(20, timeout=30)
        victim = stack.pids()["agent-0"]
        os.kill(victim, signal.SIGKILL)
        transcripts = wait_answered(stack, llm, sessions, 4, timeout=240)
        assert_exactly_once_in_order(transcripts, 4)
        assert stack.pids()["agent-0"] != victim  # the launcher restarted it
        # Channel replies went out exactly once: one run's parts, each part once. Every lane
        # delivery acked first: the victim's come back after the ack wait and are acked only
        # after a republish of their committed replies, which would land here as duplicates.
        settle(stack.nats_url)  # type: ignore[attr-defined]
        replies = asyncio.run(outbound_replies(stack))
        for key in on_channel:
            for i in range(4):
                parts = replies[f"{key}#{i}"]
                assert parts, f"no reply went out for {key}#{i}"
                assert len({run for run, _, _ in parts}) == 1, parts
                assert sorted(p for _, p, _ in parts) == list(range(parts[0][2])), parts
        api_replies = [mid for mid in replies if mid.split("#")[0] not in on_channel]
        assert not api_replies  # API replies travel as events only
    finally:
        llm.stream_delay_s = 0.0
