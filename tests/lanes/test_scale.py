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
import pytest

from tests.fakes.llm import FakeLLM, RecordedCall, tool_then_text
from tests.support.stack import Stack, start_stack, stop_stack

SESSION = re.compile(r"Session: (\S+)\. ")


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(tool_then_text("get_time", {"timezone": "UTC"})) as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[Stack]:
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{llm.base_url}/v1"}
    stack = start_stack(
        tmp_path_factory.mktemp("lanes"), env, args=["--scale", "agent=2", "--scale", "tools=2"]
    )
    yield stack
    left = stop_stack(stack)
    assert not left, f"processes left behind: {left}"


async def post_all(stack: Stack, sessions: list[str], per_session: int) -> None:
    """Each session posts its messages in order; all sessions at once, as fast as possible."""
    headers = {"Authorization": f"Bearer {stack.token}"}
    # Idle connections are dropped before uvicorn's 5 s keep-alive timeout can close one under
    # a request that is being sent on it (which surfaces as httpx.ReadError).
    limits = httpx.Limits(max_connections=50, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, limits=limits) as client:

        async def one_session(key: str) -> None:
            for i in range(per_session):
                r = await client.post(f"/api/sessions/{key}/messages", json={"text": f"{key}#{i}"})
                assert r.status_code == 202, r.text

        await asyncio.gather(*(one_session(k) for k in sessions))


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
        asyncio.run(post_all(stack, sessions, 4))
        llm.wait_for_calls(20, timeout=30)
        victim = stack.pids()["agent-0"]
        os.kill(victim, signal.SIGKILL)
        transcripts = wait_answered(stack, llm, sessions, 4, timeout=240)
        assert_exactly_once_in_order(transcripts, 4)
        assert stack.pids()["agent-0"] != victim  # the launcher restarted it
    finally:
        llm.stream_delay_s = 0.0
