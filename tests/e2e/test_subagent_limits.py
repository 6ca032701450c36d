"""The limits of sub-agents end to end (`switchboard up` against the fake OpenAI-compatible
model): SB_SUBAGENT_MAX_DEPTH and SB_SUBAGENT_MAX_CHILDREN answer as readable tool errors,
SB_SUBAGENT_CONCURRENCY bounds how many children of one ``wait`` run at once, and
SB_SUBAGENT_TIMEOUT_S ends a ``wait`` whose child has not answered (its answer then arrives in
the parent's conversation, as a background child's does).

Nothing here is timed: a "hold" child's model call waits (in the fake model's worker thread)
until the test lets it go, so the test knows which children run, and reads the LANES stream to
see which children were started at all."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import nats
import pytest

from switchboard.embedded import free_port
from switchboard.v1 import messages_pb2
from tests.e2e.helpers import client, final_text, history, next_reply, wait_for
from tests.e2e.subagent_support import ask, calls_for, run_stack, tool_results
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.stack import Stack
from tests.support.streams import stored

HOLD_S = 40  # how long a held child waits for the test before it answers anyway
CONCURRENCY = 2  # SB_SUBAGENT_CONCURRENCY of the limits stack
FANOUT = 3  # children of the concurrency test's one wait (SB_SUBAGENT_MAX_CHILDREN)
WAIT_S = 2  # SB_SUBAGENT_TIMEOUT_S of the timeout stack


class Holds:
    """Children's model calls held until the test lets each go. A child is "held" from the
    moment its call reaches the fake model until the test releases it (the test's release
    takes it out at once, so the count never lags behind the test)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._entered: dict[str, list[str]] = {}  # by tag, in order of arrival
        self._held: dict[str, list[str]] = {}
        self._most: dict[str, int] = {}  # the most held at once
        self._go: set[str] = set()

    def hold(self, tag: str, name: str) -> bool:
        """Called by the child's model call: wait (bounded) to be let go; False if never."""
        with self._cond:
            self._entered.setdefault(tag, []).append(name)
            held = self._held.setdefault(tag, [])
            held.append(name)
            self._most[tag] = max(self._most.get(tag, 0), len(held))
            self._cond.notify_all()
            go = self._cond.wait_for(lambda: name in self._go, HOLD_S)
            if not go:
                held.remove(name)
            return go

    def wait_held(self, tag: str, n: int, timeout: float = 60) -> list[str]:
        """The children of ``tag`` held now, once there are at least ``n``."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._held.get(tag, [])) >= n, timeout):
                raise AssertionError(f"{n} children of {tag} never held: {self._held.get(tag)}")
            return list(self._held[tag])

    def release(self, name: str) -> None:
        tag = name.split()[1]
        with self._cond:
            self._held[tag].remove(name)
            self._go.add(name)
            self._cond.notify_all()

    def entered(self, tag: str) -> list[str]:
        with self._cond:
            return list(self._entered.get(tag, []))

    def most(self, tag: str) -> int:
        with self._cond:
            return self._most.get(tag, 0)


HOLDS = Holds()


def script(req: FakeRequest) -> Reply:
    words = req.last_user_text.split()
    head = words[0] if words else ""
    done = req.last_tool_results
    if req.last_user_text.startswith("[sub-agent"):
        return Reply(text="announced: " + req.last_user_text)
    if head == "hold":  # child "hold <tag> <n>": answers once the test lets it go
        go = HOLDS.hold(words[1], req.last_user_text)
        return Reply(text=f"{req.last_user_text}: " + ("let go" if go else "never let go"))
    if head in ("bounded", "late", "deep"):  # parent: spawn, wait, quote the tool result
        if done:
            return Reply(text="child answered: " + done[0])
        spawns: dict[str, dict[str, Any]] = {
            "bounded": {"tasks": [f"hold {words[1]} {i}" for i in range(FANOUT)]},
            "late": {"task": f"hold {words[1]} 0", "label": "late"},
            "deep": {"task": f"nest {words[1]}"},
        }
        return Reply(tool_calls=[("sessions_spawn", spawns[head])])
    if head == "nest":  # child: tries to spawn a grandchild
        if done:
            return Reply(text="refusals: " + " | ".join(done))
        return Reply(tool_calls=[("sessions_spawn", {"task": "grandchild"})])
    if head == "many":  # parent: 4 children (over the limit of 3), then 3, then 1 more
        results = tool_results(req)
        sizes = [4, 3, 1]
        if len(results) < len(sizes):
            quick = [f"quick {i}" for i in range(sizes[len(results)])]
            return Reply(tool_calls=[("sessions_spawn", {"tasks": quick})])
        return Reply(text="limits: " + " || ".join(results))
    return Reply(text=f"quick done ({req.last_user_text})")


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(script, threaded=True) as fake:
        yield fake


@pytest.fixture(scope="module")
def limits_stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[Stack]:
    """Children may call sessions_spawn (policy), so the depth limit itself answers; three
    children per run, two at a time; NATS on a known port, so the test can read LANES."""
    nats_port = free_port()
    env = {
        "SB_SUBAGENT_TOOL_POLICY": json.dumps({"deny": ["memory_store", "cron", "message"]}),
        "SB_SUBAGENT_MAX_CHILDREN": str(FANOUT),
        "SB_SUBAGENT_CONCURRENCY": str(CONCURRENCY),
        "SB_NATS_PORT": str(nats_port),
    }
    stacks = run_stack(tmp_path_factory.mktemp("sblimits"), llm, env)
    stack = next(stacks)
    stack.nats_url = f"nats://127.0.0.1:{nats_port}"  # type: ignore[attr-defined]
    yield stack
    next(stacks, None)  # stopped, and nothing left behind


@pytest.fixture(scope="module")
def timeout_stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[Stack]:
    """A ``wait`` ends after WAIT_S seconds."""
    env = {"SB_SUBAGENT_TIMEOUT_S": str(WAIT_S)}
    yield from run_stack(tmp_path_factory.mktemp("sbtimeout"), llm, env)


def started(stack: Stack, parent_key: str) -> list[str]:
    """The children of ``parent_key`` whose task is on their lane (started), in order."""

    async def read() -> list[str]:
        nats_url = stack.nats_url  # type: ignore[attr-defined]
        nc = await nats.connect(stack.admin_nats_url(nats_url))
        try:
            items = await stored(nc.jetstream(), "LANES", messages_pb2.LaneItem)
        finally:
            await nc.close()
        return [
            i.message.message.text
            for i in items
            if i.message.message.channel == "subagent"
            and i.message.session_key.startswith(f"{parent_key}:sub:")
        ]

    return asyncio.run(read())


def test_depth_and_count_limits_are_readable_tool_errors(limits_stack: Stack, llm: FakeLLM) -> None:
    tag = f"lim{uuid.uuid4().hex[:6]}"
    deep = ask(limits_stack, f"main:api:{tag}", f"deep {tag}")
    assert "sessions_spawn" in calls_for(llm, f"nest {tag}")[0].tools  # the policy allows it
    assert (
        "sessions_spawn refused: this session is 1 level(s) deep and sub-agents may nest only"
        " 1 level(s) (SB_SUBAGENT_MAX_DEPTH)" in deep
    ), deep
    assert not calls_for(llm, "grandchild")

    many = ask(limits_stack, f"main:api:many{tag}", f"many {tag}")
    first, second, third = many.removeprefix("limits: ").split(" || ")
    assert "one run may start 3 sub-agents in all (SB_SUBAGENT_MAX_CHILDREN)" in first
    assert first.endswith("this run started 0 and asked for 4 more. Nothing was started.")
    assert second.startswith("[1] sub-agent main:api:many")
    assert all(f"quick done (quick {i})" in second for i in range(3)), second
    assert third.endswith("this run started 3 and asked for 1 more. Nothing was started.")
    assert len(calls_for(llm, "quick 0")) == 1  # the refused calls started nobody


def test_at_most_subagent_concurrency_children_of_a_wait_run_at_once(
    limits_stack: Stack,
) -> None:
    """Three children, two at a time: while two are held in the model, the third is not even
    on its lane; each one the test lets go frees a slot that the next one takes."""
    tag = f"cc{uuid.uuid4().hex[:6]}"
    key = f"main:api:{tag}"
    with client(limits_stack.url, limits_stack.token) as c:
        r = c.post(f"/api/sessions/{key}/messages", json={"text": f"bounded {tag}"})
        assert r.status_code == 202, r.text
        for released in range(FANOUT):
            running = min(CONCURRENCY, FANOUT - released)
            held = HOLDS.wait_held(tag, running)
            # Exactly so many run, and no other child was started: the rest wait their turn.
            assert len(held) == running, held
            assert len(HOLDS.entered(tag)) == released + running, HOLDS.entered(tag)
            assert len(started(limits_stack, key)) == released + running, started(limits_stack, key)
            HOLDS.release(held[0])
        reply = next_reply(c, key, 0, timeout=90)
    assert HOLDS.most(tag) == CONCURRENCY
    assert reply.startswith("child answered: [1] sub-agent "), reply
    assert reply.count(": completed") == FANOUT, reply
    assert all(f"hold {tag} {i}: let go" in reply for i in range(FANOUT)), reply


def test_a_wait_ends_at_subagent_timeout_s_and_the_answer_comes_later(
    timeout_stack: Stack,
) -> None:
    """The child is held in the model past the wait: the parent's turn goes on with a tool
    result saying it still runs; once the test lets it go, its answer is announced into the
    parent's conversation (a second message the parent answers)."""
    tag = f"to{uuid.uuid4().hex[:6]}"
    key = f"main:api:{tag}"
    first = ask(timeout_stack, key, f"late {tag}")
    # (The child cannot have answered: only the test lets it go, below.)
    assert first.startswith(f"child answered: [1] sub-agent late ({key}:sub:"), first
    assert first.endswith(
        ": timeout\nstill running when the wait ended; its answer will arrive in this conversation."
    ), first
    [child] = HOLDS.wait_held(tag, 1)
    HOLDS.release(child)
    with client(timeout_stack.url, timeout_stack.token) as c:
        text = wait_for(
            lambda: (t := final_text(c, key)) and t.startswith("announced") and t, timeout=90
        )
        messages = history(c, key)
    child_key = first.split("(", 1)[1].split(")", 1)[0]
    assert text == f"announced: [sub-agent late ({child_key}) finished]\nhold {tag} 0: let go"
    results = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert [r["is_error"] for r in results] == [False]  # a timeout is no failure
    asked = [m for m in messages if m["role"] == "user" and m["content"][0]["type"] == "text"]
    assert len(asked) == 2  # the announcement is the session's second message
