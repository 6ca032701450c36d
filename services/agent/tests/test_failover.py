"""Model failover through the real SDKs against the fake LLM's wire formats: a 429 falls back
(both providers, as an HTTP error and inside a 200 stream), retry-after is honoured, a refused
key moves to the next auth profile, overload moves on, context overflow retries once smaller,
and tiers and per-agent models resolve."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from switchboard.settings import ModelSettings
from switchboard_agent.providers import (
    ModelContextOverflowError,
    ModelError,
    ModelRateLimitError,
    ModelRequest,
    ModelResponse,
    TextDelta,
)
from switchboard_agent.providers.failover import ModelRouter
from switchboard_agent.providers.failover_config import FailoverSettings, choose_router
from switchboard_agent.providers.overflow import OMITTED_NOTE
from switchboard_agent.providers.profiles import Cooldowns
from tests.fakes.llm import FakeLLM, FakeRequest, Reply

KEY_A = "sk-profile-a-0123456789"
KEY_B = "sk-profile-b-0123456789"
PROVIDERS = ["anthropic", "openai"]


def answer(req: FakeRequest) -> Reply:
    return Reply(text=f"{req.model} answered")


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLM]:
    with FakeLLM(answer) as llm:
        yield llm


@pytest.fixture
def llm(server: FakeLLM) -> Iterator[FakeLLM]:
    server.reset()
    yield server
    server.reset()


def router(llm: FakeLLM, provider: str = "openai", **failover: Any) -> ModelRouter:
    """A router with ``provider``'s usual key (KEY_A) pointing at the fake, plus settings."""
    base = llm.base_url if provider == "anthropic" else llm.openai_base_url
    model: dict[str, Any] = {
        f"{provider}_api_key": SecretStr(KEY_A),
        f"{provider}_base_url": base,
        "model": failover.pop("model", f"{provider}:primary"),
    }
    found, reply = choose_router(ModelSettings(**model), FailoverSettings(**failover))
    assert found is not None, reply
    return found


def request(*texts: str) -> ModelRequest:
    messages: list[dict[str, Any]] = []
    for i, text in enumerate(texts or ("hi",)):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": [{"type": "text", "text": text}]})
    return ModelRequest(system="be brief", messages=messages)


async def call(model: Any, req: ModelRequest | None = None) -> ModelResponse:
    final = None
    async for item in model.stream(req or request()):
        if not isinstance(item, TextDelta):
            final = item
    assert final is not None
    return final


@pytest.mark.parametrize("in_stream", [False, True], ids=["http-error", "in-stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_429_falls_back_and_honours_retry_after(
    llm: FakeLLM, provider: str, in_stream: bool
) -> None:
    """The peers' bug: a 429 that never reaches the fallback. Here the primary is called once
    (no SDK retry hides it), the fallback answers, the failover is recorded with the provider's
    retry-after, and a second call inside that retry-after goes straight to the fallback."""
    chain = router(llm, provider, model_fallbacks=[f"{provider}:fallback"])
    llm.fail_next(429, provider=provider, model="primary", retry_after=30, in_stream=in_stream)
    bound = chain.bind("main")
    response = await call(bound)
    assert response.text == "fallback answered"
    assert [(c.request.model, c.status) for c in llm.calls] == [
        ("primary", 429),
        ("fallback", 200),
    ]
    assert llm.calls[0].request.stream is True
    [move] = bound.failovers
    assert (move.from_ref, move.to_ref, move.reason) == (
        f"{provider}:primary",
        f"{provider}:fallback",
        "rate_limit",
    )
    if not in_stream:  # a header only comes with an HTTP error
        assert move.retry_after_s == 30
    assert f"{bound.provider}:{bound.model}" == f"{provider}:fallback"
    again = await call(chain.bind("main"))
    assert again.text == "fallback answered"
    assert [c.request.model for c in llm.calls[2:]] == ["fallback"]  # primary still resting


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_overloaded_moves_on_and_a_lone_model_waits_out_a_short_retry_after(
    llm: FakeLLM, provider: str
) -> None:
    """529 (Anthropic) / 503 (OpenAI) move to the fallback; with no fallback, a retry-after
    under SB_FAILOVER_MAX_WAIT_S is waited out and the same model called again."""
    status = 529 if provider == "anthropic" else 503
    chain = router(llm, provider, model_fallbacks=[f"{provider}:fallback"])
    llm.fail_next(status, provider=provider, model="primary")
    bound = chain.bind("main")
    assert (await call(bound)).text == "fallback answered"
    assert bound.failovers[0].reason == "overloaded"

    llm.reset()
    alone = router(llm, provider, failover_max_wait_s=5)
    now = [0.0]
    alone.cooldowns = Cooldowns(lambda: now[0])
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    alone.sleep = sleep
    llm.fail_next(429, provider=provider, retry_after=2)
    bound = alone.bind("main")
    assert (await call(bound)).text == "primary answered"
    assert slept == [2]
    assert [c.status for c in llm.calls] == [429, 200]
    assert bound.failovers[0].waited_s > 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_long_retry_after_fails_fast_with_the_providers_message(
    llm: FakeLLM, provider: str
) -> None:
    """Retry-after beyond SB_FAILOVER_MAX_WAIT_S and nothing else to try: a clear error now,
    no parked run and no second call."""
    chain = router(llm, provider, failover_max_wait_s=5)
    llm.fail_next(429, provider=provider, retry_after=3600)
    with pytest.raises(ModelRateLimitError) as caught:
        await call(chain.bind("main"))
    assert "rate-limiting" in caught.value.message
    assert "free again in 3600 s" in caught.value.message
    assert len(llm.calls) == 1


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_refused_key_moves_to_the_next_auth_profile_which_rests(
    llm: FakeLLM, provider: str, status: int
) -> None:
    profiles = {provider: [{"name": "backup", "api_key": KEY_B}]}
    chain = router(llm, provider, auth_profiles=profiles)
    llm.fail_next(status, provider=provider, key=KEY_A)
    bound = chain.bind("main")
    assert (await call(bound)).text == "primary answered"
    [move] = bound.failovers
    assert (move.reason, move.from_profile, move.to_profile) == ("auth", "default", "backup")
    assert move.from_ref == move.to_ref == f"{provider}:primary"
    assert KEY_A not in json.dumps(move.data()) and KEY_B not in json.dumps(move.data())
    llm.reset()
    await call(chain.bind("main"))  # the refused profile is resting: straight to the backup
    assert len(llm.calls) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_context_overflow_retries_once_with_the_recent_tail(
    llm: FakeLLM, provider: str
) -> None:
    chain = router(llm, provider)
    long = request("one", "two", "three", "four", "five")
    llm.overflow_next(provider=provider)
    bound = chain.bind("main")
    assert (await call(bound, long)).text == "primary answered"
    first, retry = llm.calls
    assert first.status == 400 and retry.status == 200
    assert len(retry.request.messages) < len(first.request.messages)
    assert retry.request.last_user_text == "five"
    assert OMITTED_NOTE in retry.request.system
    assert bound.failovers[0].reason == "context_overflow"

    llm.reset()
    llm.overflow_next(2, provider=provider)
    with pytest.raises(ModelContextOverflowError):
        await call(chain.bind("main"), long)
    assert len(llm.calls) == 2  # retried once, not more


async def test_cross_provider_fallback_and_tiers_per_agent(llm: FakeLLM) -> None:
    """An Anthropic primary rate-limited falls back to an OpenAI model; tiers resolve and
    SB_AGENT_MODELS gives an agent its own primary."""
    found, reply = choose_router(
        ModelSettings(
            model="tier:standard",
            anthropic_api_key=SecretStr(KEY_A),
            anthropic_base_url=llm.base_url,
            openai_api_key=SecretStr(KEY_B),
            openai_base_url=llm.openai_base_url,
        ),
        FailoverSettings(
            model_tiers={"fast": "openai:small", "standard": "anthropic:primary"},
            agent_models={"quick": "fast"},
            model_fallbacks=["fast"],
        ),
    )
    assert found is not None, reply
    assert found.primary("main") == "anthropic:primary"
    assert found.primary("quick") == "openai:small"
    llm.fail_next(429, provider="anthropic")
    bound = found.bind("main")
    assert (await call(bound)).text == "small answered"
    assert [(c.provider, c.request.model) for c in llm.calls] == [
        ("anthropic", "primary"),
        ("openai", "small"),
    ]


def test_bad_references_name_the_setting_to_fix() -> None:
    cases: list[tuple[dict[str, Any], dict[str, Any], str]] = [
        ({"model": "tier:fast"}, {}, "SB_MODEL: tier 'fast' is not set in SB_MODEL_TIERS"),
        ({}, {"model_fallbacks": ["anthropic:x"]}, "SB_MODEL_FALLBACKS: model 'anthropic:x'"),
        ({}, {"model_tiers": {"huge": "openai:x"}}, "SB_MODEL_TIERS: unknown tier(s) huge"),
        ({}, {"agent_models": {"a": "nope:x"}}, "SB_AGENT_MODELS.a: unknown model provider"),
        ({}, {"auth_profiles": {"openai": [{"name": "default", "api_key": "k"}]}}, "own"),
    ]
    for model, failover, expected in cases:
        settings = ModelSettings(openai_api_key=SecretStr("sk-x"), **model)
        found, reply = choose_router(settings, FailoverSettings(**failover))
        assert found is None
        assert expected in reply, reply


async def test_a_bad_request_is_not_a_failover(llm: FakeLLM) -> None:
    chain = router(llm, "openai", model_fallbacks=["openai:fallback"])
    llm.fail_next(400, provider="openai", message="bad tool schema")
    bound = chain.bind("main")
    with pytest.raises(ModelError) as caught:
        await call(bound)
    assert "bad tool schema" in caught.value.message
    assert len(llm.calls) == 1 and not bound.failovers
