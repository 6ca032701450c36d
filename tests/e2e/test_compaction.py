"""Compaction end to end: `switchboard up` with the real memory service (packaged local
embeddings, turn indexing off so only the flush can put a fact in memory), a fake model that
speaks both providers' wire formats, a small context window per model (SB_MODEL_CONTEXT).

The fake model: the flush call (its system prompt) stores each ``FACT: ...`` of the older turns
with memory_store; the summary call answers ``SUMMARY: ...`` repeating those facts; ``recall:``
searches memory, ``read:`` reads a file; anything else is "ok"."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.chat import answer_to, say
from tests.e2e.helpers import EventTap, client, history, metric, wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, RecordedCall, Reply
from tests.support.services import ServiceProcesses, with_fake_model
from tests.support.stack import Stack, start_stack, stop_stack

WINDOW = 12_000  # tokens, both models
FLUSH = "Memory flush before compaction"
SUMMARISE = "Summarise the conversation below"
SUMMARY_HEAD = "[Summary of the earlier conversation"
FACT = "My locker code is 4817"
FILLER = " ".join(f"filler{i:04d}" for i in range(360))  # ~3,600 characters, ~900 tokens


def facts(text: str) -> list[str]:
    return re.findall(r"FACT: ([^.\n]+)", text)


def script(req: FakeRequest) -> Reply:
    if FLUSH in req.system:
        found = facts(req.last_user_text)
        if not found:
            return Reply(text="nothing to store")
        return Reply(tool_calls=[("memory_store", {"text": f}) for f in found])
    if SUMMARISE in req.system:
        kept = "".join(f" FACT: {f}." for f in facts(req.last_user_text))
        return Reply(text=f"SUMMARY: a long talk with filler.{kept}")
    if req.last_tool_results:
        return Reply(text="Tool said: " + " ".join(r[:200] for r in req.last_tool_results))
    text = req.last_user_text
    if text.startswith("recall: "):
        return Reply(tool_calls=[("memory_search", {"query": text.removeprefix("recall: ")})])
    if text.startswith("read: "):
        return Reply(tool_calls=[("read", {"path": text.removeprefix("read: ")})])
    return Reply(text="ok")


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(script) as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[Stack]:
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-test-0123456789",
        "ANTHROPIC_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "sk-openai-test-0123456789",
        "OPENAI_BASE_URL": llm.openai_base_url,
        "SB_MODEL": "openai:gpt-compact",
        "SB_AGENT_MODELS": json.dumps({"claude": "anthropic:claude-compact"}),
        "SB_MODEL_CONTEXT": json.dumps({"gpt-compact": WINDOW, "claude-compact": WINDOW}),
        "SB_COMPACTION_KEEP_TURNS": "2",
        "SB_PRUNE_TOOL_RESULTS_AFTER": "2",
        "SB_MEMORY_SYNC": "false",  # only the flush may store the fact
    }
    stack = start_stack(tmp_path_factory.mktemp("sbhome"), env, timeout=180)
    yield stack
    left = stop_stack(stack)
    assert not left, f"processes left behind: {left}\n{stack.log()}"


def ask(stack: Stack, key: str, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Post ``text`` to ``key``; the run's end event and every event of the run."""
    tap = EventTap(stack.url, stack.token, key)
    try:
        with client(stack.url, stack.token) as c:
            r = c.post(
                f"/api/sessions/{key}/messages", json={"text": text, "agent": key.split(":")[0]}
            )
            assert r.status_code == 202, r.text
        end = tap.wait("lifecycle", "end", timeout=120)
        return end, [e for e in tap.events if e["run_id"] == end["run_id"]]
    finally:
        tap.close()


def of_run(events: list[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    return [e for e in events if e["stream"] == "lifecycle" and e["phase"] == phase]


def turns_of(llm: FakeLLM, text: str) -> list[RecordedCall]:
    """The conversation's own calls for the user message ``text`` (not flush or summary)."""
    return [
        c
        for c in llm.calls
        if c.request.last_user_text == text
        and FLUSH not in c.request.system
        and SUMMARISE not in c.request.system
    ]


def conversation(call: RecordedCall) -> list[dict[str, Any]]:
    """The request's messages without the system prompt (OpenAI sends it as a message)."""
    return [m for m in call.request.messages if m.get("role") not in ("system", "developer")]


def invoke(stack: Stack, tool: str, args: dict[str, Any], session_key: str) -> str:
    with client(stack.url, stack.token) as c:
        r = c.post(
            "/tools/invoke",
            json={"tool": tool, "args": args, "sessionKey": session_key},
            timeout=60,
        )
    assert r.status_code == 200, r.text
    return str(r.json()["content"][0]["text"])


def metrics(stack: Stack) -> str:
    r = httpx.get(f"{stack.url}/metrics", headers={"Authorization": f"Bearer {stack.token}"})
    assert r.status_code == 200
    return r.text


def test_a_fact_stated_before_compaction_is_recalled_after_it(stack: Stack, llm: FakeLLM) -> None:
    key = f"main:api:long-{uuid.uuid4().hex[:8]}"
    first = f"FACT: {FACT}. {FILLER}"
    ask(stack, key, first)
    [opening] = turns_of(llm, first)
    base = opening.reply.input_tokens or 0
    assert base < WINDOW * 0.5, f"the system prompt and tools alone take {base} tokens"

    compaction: list[dict[str, Any]] = []
    said: list[str] = []
    for n in range(12):  # ~900 tokens a turn: the 80% threshold is crossed in ~8 turns
        said.append(f"turn {n}: {FILLER}")
        _, events = ask(stack, key, said[-1])
        compaction = of_run(events, "compaction")
        if compaction:
            break
    assert compaction, "no compaction within 12 long turns"
    data = compaction[0]["data"]
    assert data["reason"] == "threshold"
    assert (data["facts_flushed"], data["flushed_to"]) == (1, "memory")
    assert data["tokens_after"] < data["tokens_before"]

    # The flush: a call of its own offering only memory_store, with the old turns in it.
    [flush] = [c for c in llm.calls if FLUSH in c.request.system]
    assert flush.request.tools == ["memory_store"] and FACT in flush.request.last_user_text
    # The turn's own request after it: the summary first, then the recent tail, not the
    # turn that stated the fact, and fewer messages than the turn before.
    [before] = turns_of(llm, said[-2])
    [after] = turns_of(llm, said[-1])
    opening_text = json.dumps(conversation(after)[0])
    assert SUMMARY_HEAD in opening_text and FACT in opening_text
    assert first not in json.dumps(conversation(after))  # the turn that stated it
    assert len(conversation(after)) < len(conversation(before))
    assert said[-2] in json.dumps(conversation(after))  # the kept tail

    # The fact is in memory, stored by the flush (turns are not indexed in this stack).
    found = invoke(stack, "memory_search", {"query": "locker code"}, "main:api:someone-else")
    assert "4817" in found, found

    # A later question: the summary opens the model's request and memory answers it.
    question = "recall: what is my locker code"
    end, _ = ask(stack, key, question)
    assert "4817" in end["text"], end["text"]
    for asked in turns_of(llm, question):  # the call that searched, the one that answered
        assert SUMMARY_HEAD in json.dumps(conversation(asked)[0])

    # The compacted messages stay stored; History lists them.
    with client(stack.url, stack.token) as c:
        assert first in json.dumps(history(c, key)[0])
    assert metric(metrics(stack), "sb_agent_compactions_total", reason="threshold") >= 1


def test_compact_on_demand(stack: Stack, llm: FakeLLM) -> None:
    key = f"main:api:demand-{uuid.uuid4().hex[:8]}"
    for text in ("FACT: My bike is green. one", "two", "three"):
        ask(stack, key, text)
    with client(stack.url, stack.token) as c:
        r = c.post(f"/api/sessions/{key}/compact", json={"keep_turns": 1}, timeout=120)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["compacted"] and body["messages_compacted"] == 4, body
        assert "FACT: My bike is green" in body["summary"]
        assert (body["facts_flushed"], body["flushed_to"]) == (1, "memory")
        # Nothing older than the one turn kept now: nothing to do, and it says so.
        again = c.post(f"/api/sessions/{key}/compact", json={"keep_turns": 1}, timeout=120)
        assert again.status_code == 200 and not again.json()["compacted"], again.text
        assert again.json()["note"] == "nothing is older than the turns kept"
        # Bad input: a clear 4xx, nothing done.
        missing = c.post("/api/sessions/main:api:nobody-here/compact", timeout=30)
        assert missing.status_code == 404, missing.text
        assert c.post("/api/sessions/bad key/compact", timeout=30).status_code == 400
        bad = c.post(f"/api/sessions/{key}/compact", json={"keep_turns": 0}, timeout=30)
        assert 400 <= bad.status_code < 500
    ask(stack, key, "four")
    [call] = turns_of(llm, "four")
    messages = conversation(call)
    assert SUMMARY_HEAD in json.dumps(messages[0]) and "My bike is green" in json.dumps(messages[0])
    assert "three" in json.dumps(messages[1]) and "two" not in json.dumps(messages)
    assert metric(metrics(stack), "sb_agent_compactions_total", reason="manual") >= 1


def test_old_tool_results_are_pruned_from_the_request(stack: Stack, llm: FakeLLM) -> None:
    content = "\n".join(f"line {i}: the quick brown fox" for i in range(60))
    workspace = stack.home / "workspaces" / "main"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "big.txt").write_text(content)
    key = f"main:api:prune-{uuid.uuid4().hex[:8]}"
    ask(stack, key, "read: big.txt")
    ask(stack, key, "next one")
    ask(stack, key, "and another")

    def tool_results(call: RecordedCall) -> list[str]:
        return [str(m["content"]) for m in call.request.messages if m.get("role") == "tool"]

    [recent] = tool_results(turns_of(llm, "next one")[0])  # one user turn later: whole
    assert "line 59: the quick brown fox" in recent
    [old] = tool_results(turns_of(llm, "and another")[0])  # two turns later: a note
    assert old.startswith("[pruned: an older result of read (") and "line 59" not in old
    with client(stack.url, stack.token) as c:  # the stored transcript keeps it
        assert "line 59: the quick brown fox" in json.dumps(history(c, key))


def test_a_context_overflow_compacts_then_retries_once(stack: Stack, llm: FakeLLM) -> None:
    """Anthropic's own 400 "prompt is too long": the session is compacted (flush, summary),
    then the call is retried once with the summary and the run's message."""
    key = f"claude:api:over-{uuid.uuid4().hex[:8]}"
    for text in ("alpha", "beta", "gamma"):
        ask(stack, key, text)
    llm.overflow_next(provider="anthropic", model="claude-compact")
    end, events = ask(stack, key, "delta")
    assert end["text"] == "ok"
    failed, retried = turns_of(llm, "delta")
    assert (failed.status, retried.status) == (400, 200)
    [summary] = [
        c
        for c in llm.calls
        if SUMMARISE in c.request.system and "gamma" in c.request.last_user_text
    ]
    assert failed.end <= summary.start and summary.end <= retried.start
    messages = conversation(retried)
    assert SUMMARY_HEAD in json.dumps(messages[0]) and len(messages) == 2
    assert len(messages) < len(conversation(failed))
    [compaction] = of_run(events, "compaction")
    assert compaction["data"]["reason"] == "overflow" and compaction["data"]["kept"] == 0
    [failover] = of_run(events, "failover")
    assert failover["data"]["reason"] == "context_overflow"
    assert metric(metrics(stack), "sb_agent_compactions_total", reason="overflow") >= 1


def test_the_flush_obeys_the_sessions_tool_policy(stack: Stack, llm: FakeLLM) -> None:
    """A session that may not call memory_store is compacted without a flush call."""
    key = f"main:api:nomem-{uuid.uuid4().hex[:8]}"
    with client(stack.url, stack.token) as c:
        r = c.patch(f"/api/sessions/{key}", json={"tool_policy": {"deny": ["memory_store"]}})
        assert r.status_code == 200, r.text
    for text in ("FACT: The cat is called Pixel. first", "second"):
        ask(stack, key, text)
    with client(stack.url, stack.token) as c:
        r = c.post(f"/api/sessions/{key}/compact", json={"keep_turns": 1}, timeout=120)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["compacted"] and (body["facts_flushed"], body["flushed_to"]) == (0, "none")
    assert not [
        c for c in llm.calls if FLUSH in c.request.system and "Pixel" in str(c.request.body)
    ]
    found = invoke(stack, "memory_search", {"query": "cat called Pixel"}, "main:api:x")
    assert "Pixel" not in found, found


class AgentWithoutMemory(ServiceProcesses):
    """Every service, the agent told there is no memory service (the gateway still has it)."""

    def _spawn(
        self, name: str, service: str | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        none = {"SB_MEMORY_ADDR": ""} if (service or name) == "agent" else {}
        super()._spawn(name, service, {**(env or {}), **none})


def test_compact_in_a_chat_flushes_to_the_memory_file_without_memory(
    tmp_path: Path, nats_url: str, database_url: str
) -> None:
    """Every service a process, the agent without memory (SB_MEMORY_ADDR=""): ``/compact`` from
    the owner's Telegram DM answers at once; the flush appends the fact to memory/YYYY-MM-DD.md
    in the agent's workspace (the owner's: docs/trust.md) and the next request opens with the
    summary."""
    owner = "5151"
    key = f"main:telegram:{owner}"
    env = {"SB_OWNERS": f'["telegram:{owner}"]'}
    with with_fake_model(tmp_path, nats_url, database_url, script, env, AgentWithoutMemory) as p:
        llm: FakeLLM = p.llm  # type: ignore[attr-defined]
        with client(p.url, p.token) as c:
            say(p.nats_url, owner, "FACT: My dentist is Dr Ortiz. hello", "cc-1")
            wait_for(lambda: len(history(c, key)) == 2, timeout=60, what="the first reply")
            say(p.nats_url, owner, "second", "cc-2")
            wait_for(lambda: len(history(c, key)) == 4, timeout=60, what="the second reply")
            say(p.nats_url, owner, "/compact", "cc-3")
            assert answer_to(p.nats_url, "cc-3").startswith("Compacting this conversation")
        memory = Path(p.env["SB_WORKSPACES_DIR"]) / "main" / "memory"

        def stored() -> str:
            return "".join(f.read_text() for f in memory.glob("*.md")) if memory.is_dir() else ""

        written = wait_for(lambda: "My dentist is Dr Ortiz" in stored() and stored(), 60)
        assert f"session {key}" in written
        wait_for(lambda: [c for c in llm.calls if SUMMARISE in c.request.system], 60)
        say(p.nats_url, owner, "third", "cc-4")
        [call] = wait_for(lambda: turns_of(llm, "third"), 60, "the third turn's call")
        opening = json.dumps(conversation(call)[0])
        assert SUMMARY_HEAD in opening and "Dr Ortiz" in opening
        assert "second" in json.dumps(conversation(call)[1])  # the last turn, kept
