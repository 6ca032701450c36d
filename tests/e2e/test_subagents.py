"""Sub-agents end to end: `switchboard up` (every service a real process, real NATS and
PostgreSQL) against the fake OpenAI-compatible model, whose script answers each session by the
text of its run. A parent hands tasks to children with ``sessions_spawn``; each child runs on
its own lane; their answers reach the parent's next model call (``wait``) or arrive later as a
new message of the parent session (``background``). The limits (depth, count, concurrency,
timeout) have their own module, tests/e2e/test_subagent_limits.py.

Concurrency is proven, not timed: the fake model holds each child's model call at a barrier that
only opens when all three children's calls are in flight at the same moment."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.helpers import client, final_text, history, wait_for
from tests.e2e.subagent_support import ask, calls_for, run_stack, tool_results
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.stack import Stack

HANDSHAKE_S = 40  # how long a child's call waits for its siblings before giving up
SESSION_TOKENS = 50_000  # SB_BUDGET session_tokens of the first stack; a "burn" child uses more


class Handshakes:
    """Barriers and go-signals by name, shared by the fake model's worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._barriers: dict[str, threading.Barrier] = {}
        self._events: dict[str, threading.Event] = {}

    def meet(self, name: str, parties: int) -> bool:
        """Wait (bounded) until ``parties`` callers met here; False if they never did."""
        with self._lock:
            barrier = self._barriers.setdefault(name, threading.Barrier(parties))
        try:
            barrier.wait(HANDSHAKE_S)
        except threading.BrokenBarrierError:
            return False
        return True

    def event(self, name: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault(name, threading.Event())


HANDSHAKES = Handshakes()


def script(req: FakeRequest) -> Reply:
    words = req.last_user_text.split()
    head = words[0] if words else ""
    done = req.last_tool_results
    if req.last_user_text.startswith("[sub-agent"):
        return Reply(text="announced: " + req.last_user_text)
    if head == "fanout":  # parent: three children at once, wait for them
        if done:
            return Reply(text="gathered: " + " || ".join(done))
        tasks = [{"task": f"hs {words[1]} {i}", "label": f"part{i}"} for i in range(3)]
        return Reply(tool_calls=[("sessions_spawn", {"tasks": tasks})])
    if head == "hs":  # child: answers only once all three children's calls are here
        met = HANDSHAKES.meet(f"hs {words[1]}", 3)
        return Reply(text=f"child {words[2]}: " + ("met all three" if met else "alone"))
    if head in ("forbidden", "spend"):  # parent: one child, wait, quote it
        if done:
            return Reply(text="child answered: " + done[0])
        child = {"forbidden": "try", "spend": "burn"}[head]
        return Reply(tool_calls=[("sessions_spawn", {"task": f"{child} {words[1]}"})])
    if head == "try":  # child: what a child may not do
        if done:
            return Reply(text="refusals: " + " | ".join(done))
        calls: list[tuple[str, dict[str, Any]]] = [
            ("sessions_spawn", {"task": "grandchild"}),
            ("memory_store", {"text": "a secret"}),
        ]
        return Reply(tool_calls=calls)
    if head == "burn":  # child: one expensive call
        return Reply(text="burned", input_tokens=SESSION_TOKENS + 10_000, output_tokens=10)
    if head == "background":
        if done:
            return Reply(text="spawned: " + done[0])
        spawn = {"task": f"bgwork {words[1]}", "mode": "background", "label": "bg"}
        return Reply(tool_calls=[("sessions_spawn", spawn)])
    if head == "bgwork":  # child: waits until the test saw the parent's first answer
        go = HANDSHAKES.event(f"go {words[1]}").wait(HANDSHAKE_S)
        return Reply(text=f"bg result {words[1]}: " + ("go seen" if go else "no go"))
    if head == "survey":  # parent: a child, then every other session tool in turn
        return survey(words[1], tool_results(req))
    return Reply(text=f"quick done ({req.last_user_text})")


def survey(tag: str, results: list[str]) -> Reply:
    steps: list[tuple[str, dict[str, Any]]] = [
        ("sessions_spawn", {"task": f"quick {tag}", "label": "helper"}),
        ("sessions_list", {}),
    ]
    if results:
        child = re.search(r"main:api:\S+:sub:[0-9a-f]{12}", results[0])
        steps.append(("sessions_history", {"session_key": child.group(0) if child else "?"}))
    steps += [
        ("sessions_send", {"session_key": f"main:api:other{tag}", "text": "ping", "wait_s": 60}),
        ("sessions_send", {"session_key": "main:api:nobody", "text": "ping"}),
    ]
    if len(results) < len(steps):
        return Reply(tool_calls=[steps[len(results)]])
    return Reply(text=" || ".join(results))


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(script, threaded=True) as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[Stack]:
    """Default sub-agent settings and policy; a session budget; the session tools of the
    owner's (API) sessions see every session of the agent (docs/trust.md: the default shows a
    session's own tree)."""
    env = {
        "SB_BUDGET": json.dumps({"session_tokens": SESSION_TOKENS}),
        "SB_SESSION_VISIBILITY": "agent",
    }
    yield from run_stack(tmp_path_factory.mktemp("sbhome"), llm, env)


def test_three_children_run_in_parallel_and_answer_the_parents_next_turn(
    stack: Stack, llm: FakeLLM
) -> None:
    tag = f"fan{uuid.uuid4().hex[:6]}"
    key = f"main:api:{tag}"
    reply = ask(stack, key, f"fanout {tag}")
    # The parent's second model call carries the three answers in its tool result.
    parent = calls_for(llm, f"fanout {tag}")
    assert len(parent) == 2, [p.last_tool_results for p in parent]
    assert "sessions_spawn" in parent[0].tools
    [result] = parent[1].last_tool_results
    for i in range(3):
        # Each child's call met both others at the barrier: the three ran at the same time.
        assert f"child {i}: met all three" in result, result
        assert f"sub-agent part{i} ({key}:sub:" in result
    assert result.count(": completed") == 3
    assert reply.startswith("gathered: [1] sub-agent part0")
    # Each child is a session of its own, with the sub-agent prompt and its own transcript.
    children = [c.request for c in llm.calls if c.request.last_user_text.startswith(f"hs {tag}")]
    assert len(children) == 3
    assert all("You are a sub-agent" in c.system and key in c.system for c in children)
    assert all("Session: " + key + ":sub:" in c.system for c in children)
    keys = sorted(set(re.findall(re.escape(key) + r":sub:[0-9a-f]{12}", result)))
    assert len(keys) == 3
    with client(stack.url, stack.token) as c:
        for n, child in enumerate(keys):
            messages = history(c, child)
            assert messages[0]["content"][0]["text"].startswith(f"hs {tag} ")
            assert [m["role"] for m in messages] == ["user", "assistant"], n


def test_a_child_may_not_spawn_or_write_memory_by_default(stack: Stack, llm: FakeLLM) -> None:
    tag = f"deny{uuid.uuid4().hex[:6]}"
    reply = ask(stack, f"main:api:{tag}", f"forbidden {tag}")
    [first, _] = calls_for(llm, f"try {tag}")
    # Not offered, and refused when asked for anyway, by the sub-agent layer.
    assert "sessions_spawn" not in first.tools and "memory_store" not in first.tools
    assert "exec" in first.tools and "sessions_spawn" in calls_for(llm, f"forbidden {tag}")[0].tools
    assert "sessions_spawn is denied by the sub-agent policy (deny: sessions_spawn)" in reply
    assert "memory_store is denied by the sub-agent policy (deny: memory_store)" in reply
    assert not calls_for(llm, "grandchild")


def test_a_background_child_is_announced_into_the_parent_session_later(
    stack: Stack, llm: FakeLLM
) -> None:
    tag = f"bg{uuid.uuid4().hex[:6]}"
    key = f"main:api:{tag}"
    first = ask(stack, key, f"background {tag}")
    # The parent answered while its child still waits for the go-file: it did not wait.
    assert first.startswith(f"spawned: Started 1 sub-agent(s) in the background: {key}:sub:")
    HANDSHAKES.event(f"go {tag}").set()
    with client(stack.url, stack.token) as c:
        text = wait_for(
            lambda: (t := final_text(c, key)) and t.startswith("announced") and t, timeout=90
        )
        asked = [m for m in history(c, key) if m["content"][0]["type"] == "text"]
        runs = [m for m in asked if m["role"] == "user"]
    assert text.startswith(f"announced: [sub-agent bg ({key}:sub:")
    assert text.endswith(f"finished]\nbg result {tag}: go seen")
    assert len(runs) == 2  # the announcement is the session's second message


def test_list_history_and_send_reach_the_agents_own_sessions(stack: Stack) -> None:
    tag = f"sv{uuid.uuid4().hex[:6]}"
    other, key = f"main:api:other{tag}", f"main:api:survey{tag}"
    assert ask(stack, other, "quick hi") == "quick done (quick hi)"
    spawned, listed, read, sent, unknown = ask(stack, key, f"survey {tag}").split(" || ")
    assert spawned.startswith(f"[1] sub-agent helper ({key}:sub:")
    assert f"- {other}: 2 messages" in listed  # (this run's own session: not before its commit)
    assert "Sub-agents of this session:" in listed and "[helper]: wait, done" in listed
    assert read == f"user: quick {tag}\nassistant: quick done (quick {tag})"
    # The other session answered the message in its own lane; the answer came back.
    answer = f"quick done ([message from session {key}]\nping)"
    assert sent == f"{other} answered (completed):\n{answer}"
    assert (
        unknown == "Error: sessions_send: there is no session 'main:api:nobody'; nothing was sent."
    )
    with client(stack.url, stack.token) as c:
        assert final_text(c, other) == answer


def test_a_childs_tokens_count_toward_the_parents_session_budget(
    stack: Stack, llm: FakeLLM
) -> None:
    tag = f"spend{uuid.uuid4().hex[:6]}"
    key = f"main:api:{tag}"
    reply = ask(stack, key, f"spend {tag}")
    # The parent's own call used about a thousand tokens; the child's 60,010 stop its next.
    assert len(calls_for(llm, f"spend {tag}")) == 1
    assert reply.startswith("Budget limit reached: this conversation has used ")
    assert "SB_BUDGET session_tokens" in reply
    with client(stack.url, stack.token) as c:
        r = c.get("/api/usage", params={"session": key})
        own = r.json()["total"]["input_tokens"] + r.json()["total"]["output_tokens"]
    assert own < SESSION_TOKENS  # the parent alone is far under its budget
