"""Failover and budgets end to end: `switchboard up` against the fake model speaking both
providers' wire formats, each agent with its own primary model (SB_AGENT_MODELS) and one
fallback chain (SB_MODEL_FALLBACKS); errors scripted per model and API key. Every failover is an
agent event, an attribute of the llm.call span and a metric; a session or agent at its budget
gets a clear refusal and the fake sees no call. A 429 with ``Retry-After: 0`` moves on to the
fallback too, and nothing fails over once text has streamed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import EventTap, client, history, metric, wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.otlp import OtlpReceiver
from tests.support.stack import Stack, start_stack, stop_stack

OPENAI_KEY = "sk-openai-default-0123456789"
BACKUP_KEY = "sk-openai-backup-0123456789"
FALLBACK = "openai:gpt-fallback"
AGENTS = {
    "gpt": "openai:gpt-primary",
    "gpts": "openai:gpt-streamfail",
    "claude": "anthropic:claude-primary",
    "claudes": "anthropic:claude-streamfail",
    "over": "anthropic:claude-over",
    "busy": "openai:gpt-busy",
    "keys": "openai:gpt-keys",
    "long": "openai:gpt-long",
    "capped": "openai:gpt-capped",
    "spender": "openai:gpt-spender",
    "gpt0": "openai:gpt-zero",
    "claude0": "anthropic:claude-zero",
    "gptmid": "openai:gpt-midstream",
    "claudemid": "anthropic:claude-midstream",
    "gptbreak": "openai:gpt-break",
}
PARTIAL = "The first half of "


def script(req: FakeRequest) -> Reply:
    """``<model> says: <text>``; a message containing "big" reports 21,000 tokens."""
    text = f"{req.model} says: {req.last_user_text}"
    if "big" in req.last_user_text:
        return Reply(text=text, input_tokens=15_000, output_tokens=6_000)
    return Reply(text=text)


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(script) as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM, otlp: OtlpReceiver
) -> Iterator[Stack]:
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-test-0123456789",
        "ANTHROPIC_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": OPENAI_KEY,
        "OPENAI_BASE_URL": llm.openai_base_url,
        "SB_MODEL": "openai:gpt-primary",
        "SB_AGENT_MODELS": json.dumps(AGENTS),
        "SB_MODEL_FALLBACKS": json.dumps([FALLBACK]),
        "SB_AUTH_PROFILES": json.dumps({"openai": [{"name": "backup", "api_key": BACKUP_KEY}]}),
        "SB_MODEL_COOLDOWN_S": "120",  # errors without retry-after: rest past the test
        "SB_BUDGET": json.dumps(
            {"session_tokens": 20_000, "agents": {"spender": {"agent_daily_usd": 0.05}}}
        ),
        "SB_PRICES": json.dumps({"gpt-spender": {"input": 2.5, "output": 10}}),
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    stack = start_stack(tmp_path_factory.mktemp("sbhome"), env, timeout=120)
    yield stack
    left = stop_stack(stack)
    assert not left, f"processes left behind: {left}\n{stack.log()}"


def ask(stack: Stack, agent: str, peer: str, text: str) -> tuple[dict[str, Any], EventTap]:
    """Post ``text`` to ``<agent>:api:<peer>``; the run's end event and the tap (to close)."""
    key = f"{agent}:api:{peer}"
    tap = EventTap(stack.url, stack.token, key)
    with client(stack.url, stack.token) as c:
        r = c.post(f"/api/sessions/{key}/messages", json={"text": text, "agent": agent})
        assert r.status_code == 202, r.text
    try:
        return tap.wait("lifecycle", "end", timeout=60), tap
    finally:
        tap.close()


def calls_of(llm: FakeLLM, text: str) -> list[tuple[str, int]]:
    return [(c.request.model, c.status) for c in llm.calls if c.request.last_user_text == text]


def metrics(stack: Stack) -> str:
    r = httpx.get(f"{stack.url}/metrics", headers={"Authorization": f"Bearer {stack.token}"})
    assert r.status_code == 200
    return r.text


@pytest.mark.parametrize(
    ("agent", "in_stream"),
    [("gpt", False), ("gpts", True), ("claude", False), ("claudes", True)],
    ids=["openai-http-error", "openai-in-stream", "anthropic-http-error", "anthropic-in-stream"],
)
def test_a_429_falls_back_on_both_providers(
    stack: Stack, llm: FakeLLM, otlp: OtlpReceiver, agent: str, in_stream: bool
) -> None:
    """The peers' most reported failover bug: a 429 that never reaches the fallback. The
    primary is called once, the fallback answers in the same run, the failover is an event, a
    span attribute and a metric, and the next message skips the resting primary."""
    primary = AGENTS[agent]
    provider, _, model = primary.partition(":")
    llm.fail_next(429, provider=provider, model=model, retry_after=60, in_stream=in_stream)
    peer = f"fo-{uuid.uuid4().hex[:8]}"
    end, tap = ask(stack, agent, peer, f"hello {peer}")
    assert end["text"] == f"gpt-fallback says: hello {peer}"
    assert calls_of(llm, f"hello {peer}") == [(model, 429), ("gpt-fallback", 200)]
    [event] = tap.find("lifecycle", "failover")
    data = event["data"]
    assert (data["from"], data["to"], data["reason"]) == (primary, FALLBACK, "rate_limit")
    if not in_stream:
        assert data["retry_after_s"] == 60
    labels = {"from": primary, "to": FALLBACK, "reason": "rate_limit"}
    assert metric(metrics(stack), "sb_agent_failovers_total", **labels) >= 1

    def failover_span(spans: list[Any]) -> list[Any]:
        return [
            s
            for s in spans
            if s.name == "llm.call"
            and s.attributes.get("sb.failover.from") == primary
            and s.attributes.get("sb.failover.reason") == "rate_limit"
        ]

    assert failover_span(otlp.wait_for(failover_span)), "no llm.call span with the failover"

    end, _ = ask(stack, agent, peer, f"again {peer}")
    assert end["text"] == f"gpt-fallback says: again {peer}"
    assert calls_of(llm, f"again {peer}") == [("gpt-fallback", 200)]  # retry-after honoured


@pytest.mark.parametrize("agent", ["gpt0", "claude0"])
def test_a_429_with_retry_after_0_moves_on_to_the_fallback(
    stack: Stack, llm: FakeLLM, agent: str
) -> None:
    """Issue 24: the primary, free again at once, took every attempt of the run
    (SB_MODEL_MAX_ATTEMPTS) and the fallback was never called."""
    provider, _, model = AGENTS[agent].partition(":")
    llm.fail_next(429, 6, provider=provider, model=model, retry_after=0)
    peer = f"z-{uuid.uuid4().hex[:8]}"
    end, tap = ask(stack, agent, peer, f"zero {peer}")
    assert calls_of(llm, f"zero {peer}") == [(model, 429), ("gpt-fallback", 200)]
    assert end["text"] == f"gpt-fallback says: zero {peer}"
    [event] = tap.find("lifecycle", "failover")
    assert (event["data"]["to"], event["data"]["retry_after_s"]) == (FALLBACK, 0)
    llm.reset()  # the 429s left for the primary


@pytest.mark.parametrize(("agent", "status"), [("gptmid", None), ("claudemid", 529)])
def test_nothing_fails_over_once_text_has_streamed(
    stack: Stack, llm: FakeLLM, agent: str, status: int | None
) -> None:
    """The primary streams some text, then its connection drops (OpenAI) or an overloaded
    error arrives in the stream (Anthropic): the run ends with that text and the error, and
    the fallback is never called (the user would read two answers run together)."""
    provider, _, model = AGENTS[agent].partition(":")
    llm.break_stream_next(text=PARTIAL, status=status, provider=provider, model=model)
    peer = f"mid-{uuid.uuid4().hex[:8]}"
    end, tap = ask(stack, agent, peer, f"mid {peer}")
    assert calls_of(llm, f"mid {peer}") == [(model, status or 0)]
    assert end["text"].startswith(f"{PARTIAL}Sorry, the model call failed: "), end["text"]
    assert end["data"] == {"status": "error"}
    assert not tap.find("lifecycle", "failover")
    assert "".join(e.get("text", "") for e in tap.find("assistant", "delta")).startswith(PARTIAL)


def test_a_stream_that_breaks_before_any_text_fails_over(stack: Stack, llm: FakeLLM) -> None:
    llm.break_stream_next(text="", provider="openai", model="gpt-break")  # dropped at once
    peer = f"brk-{uuid.uuid4().hex[:8]}"
    end, tap = ask(stack, "gptbreak", peer, f"break {peer}")
    assert calls_of(llm, f"break {peer}") == [("gpt-break", 0), ("gpt-fallback", 200)]
    assert end["text"] == f"gpt-fallback says: break {peer}"
    [event] = tap.find("lifecycle", "failover")
    assert event["data"]["reason"] == "unavailable"


@pytest.mark.parametrize(("agent", "status"), [("over", 529), ("busy", 503)])
def test_overloaded_falls_back(stack: Stack, llm: FakeLLM, agent: str, status: int) -> None:
    provider, _, model = AGENTS[agent].partition(":")
    llm.fail_next(status, provider=provider, model=model)
    peer = f"ov-{uuid.uuid4().hex[:8]}"
    end, tap = ask(stack, agent, peer, f"busy {peer}")
    assert end["text"] == f"gpt-fallback says: busy {peer}"
    [event] = tap.find("lifecycle", "failover")
    assert event["data"]["reason"] == "overloaded"


def test_a_refused_key_moves_to_the_backup_profile(stack: Stack, llm: FakeLLM) -> None:
    llm.fail_next(401, provider="openai", model="gpt-keys", key=OPENAI_KEY)
    peer = f"key-{uuid.uuid4().hex[:8]}"
    end, tap = ask(stack, "keys", peer, f"key {peer}")
    assert end["text"] == f"gpt-keys says: key {peer}"
    assert calls_of(llm, f"key {peer}") == [("gpt-keys", 401), ("gpt-keys", 200)]
    [event] = tap.find("lifecycle", "failover")
    data = event["data"]
    assert (data["reason"], data["from_profile"], data["to_profile"]) == (
        "auth",
        "default",
        "backup",
    )
    assert OPENAI_KEY not in json.dumps(event) and BACKUP_KEY not in json.dumps(event)


def test_context_overflow_is_retried_once_smaller(stack: Stack, llm: FakeLLM) -> None:
    peer = f"long-{uuid.uuid4().hex[:8]}"
    ask(stack, "long", peer, f"first {peer}")
    llm.overflow_next(provider="openai", model="gpt-long")
    end, tap = ask(stack, "long", peer, f"second {peer}")
    assert end["text"] == f"gpt-long says: second {peer}"
    failed, retried = [c for c in llm.calls if c.request.last_user_text == f"second {peer}"]
    assert failed.status == 400 and retried.status == 200
    assert len(retried.request.messages) < len(failed.request.messages)
    [event] = tap.find("lifecycle", "failover")
    assert event["data"]["reason"] == "context_overflow"


def test_a_session_at_its_token_budget_is_refused_without_a_model_call(
    stack: Stack, llm: FakeLLM
) -> None:
    peer = f"cap-{uuid.uuid4().hex[:8]}"
    key = f"capped:api:{peer}"
    end, _ = ask(stack, "capped", peer, f"big {peer}")  # 21,000 tokens: over 20,000 now
    assert end["text"] == f"gpt-capped says: big {peer}"
    end, tap = ask(stack, "capped", peer, f"more {peer}")
    assert calls_of(llm, f"more {peer}") == []  # no model call reached the fake
    assert end["stop_reason"] == "budget"
    text = end["text"]
    assert "Budget limit reached" in text and "SB_BUDGET session_tokens" in text
    assert "21,000 tokens of its 20,000 tokens" in text
    assert tap.find("lifecycle", "budget")
    with client(stack.url, stack.token) as c:
        assert history(c, key)[-1]["content"] == [{"type": "text", "text": text}]
        r = c.get("/api/usage", params={"session": key})
        assert r.status_code == 200, r.text
        assert r.json()["total"] == {
            "input_tokens": 15_000,
            "output_tokens": 6_000,
            "tokens": 21_000,
            "cost_usd": 0.0,
            "calls": 1,
        }
        assert c.get("/api/usage", params={"day": "yesterday"}).status_code == 400
    labels = {"limit": "session_tokens", "agent": "capped"}
    assert metric(metrics(stack), "sb_agent_budget_stops_total", **labels) >= 1


def test_an_agent_over_its_daily_cost_is_refused_in_every_session(
    stack: Stack, llm: FakeLLM
) -> None:
    """SB_PRICES makes one big call cost $0.0975, over spender's $0.05 a day: its next run, in
    another session, is refused; the cost shows in /api/usage and the metric."""
    first = f"sp-{uuid.uuid4().hex[:8]}"
    ask(stack, "spender", first, f"big {first}")
    with client(stack.url, stack.token) as c:  # usage rows are written off the critical path
        wait_for(
            lambda: c.get("/api/usage", params={"agent": "spender"}).json()["total"]["calls"],
            what="the spender's usage row",
        )
    other = f"sp-{uuid.uuid4().hex[:8]}"
    end, _ = ask(stack, "spender", other, f"hi {other}")
    assert calls_of(llm, f"hi {other}") == []
    assert "SB_BUDGET agent_daily_usd" in end["text"] and "$0.10 of its $0.05" in end["text"]
    assert "midnight UTC" in end["text"]
    with client(stack.url, stack.token) as c:
        body = c.get("/api/usage", params={"agent": "spender"}).json()
    assert body["total"]["cost_usd"] == pytest.approx(0.0975)
    [row] = body["rows"]
    assert (row["agent"], row["model"]) == ("spender", "openai:gpt-spender")
    text = metrics(stack)
    assert metric(text, "sb_llm_cost_usd_total", model="openai:gpt-spender") == pytest.approx(
        0.0975
    )
    assert metric(text, "sb_llm_tokens_total", model="gpt-spender", kind="input") >= 15_000
