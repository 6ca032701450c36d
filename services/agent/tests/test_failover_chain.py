"""A failure moves the run on down the chain even when the failed model is free again at once
(issue 24). A 429 with ``Retry-After: 0``, with a retry-after shorter than a call, or with none
and ``SB_MODEL_COOLDOWN_S=0`` left the primary's rest over by the next pick: the run spent every
attempt (``SB_MODEL_MAX_ATTEMPTS``) on the primary and never called ``SB_MODEL_FALLBACKS``.
Through the real SDKs against the fake LLM's wire formats, both providers; the cooldowns' clock
is scripted so that "over at once" and "still resting" do not depend on the machine's speed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from switchboard.settings import ModelSettings
from switchboard_agent.providers import (
    ModelAuthError,
    ModelError,
    ModelRateLimitError,
    ModelRequest,
    ModelResponse,
    TextDelta,
)
from switchboard_agent.providers.failover import ModelRouter
from switchboard_agent.providers.failover_config import FailoverSettings, choose_router
from switchboard_agent.providers.profiles import Cooldowns
from tests.fakes.llm import FakeLLM, FakeRequest, Reply

KEY_A = "sk-profile-a-0123456789"
KEY_B = "sk-profile-b-0123456789"
PROVIDERS = ["anthropic", "openai"]


def answer(req: FakeRequest) -> Reply:
    return Reply(text=f"{req.model} answered")


def router(llm: FakeLLM, provider: str, **failover: Any) -> ModelRouter:
    """A router with ``provider``'s usual key (KEY_A) pointing at the fake, plus settings (as
    test_failover.py's: a test module importing another one upsets mypy's module names)."""
    base = llm.base_url if provider == "anthropic" else llm.openai_base_url
    model: dict[str, Any] = {
        f"{provider}_api_key": SecretStr(KEY_A),
        f"{provider}_base_url": base,
        "model": f"{provider}:primary",
    }
    found, reply = choose_router(ModelSettings(**model), FailoverSettings(**failover))
    assert found is not None, reply
    return found


def request() -> ModelRequest:
    return ModelRequest(
        system="be brief", messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    )


async def call(model: Any) -> ModelResponse:
    final = None
    async for item in model.stream(request()):
        if not isinstance(item, TextDelta):
            final = item
    assert final is not None
    return final


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLM]:
    with FakeLLM(answer) as llm:
        yield llm


@pytest.fixture
def llm(server: FakeLLM) -> Iterator[FakeLLM]:
    server.reset()
    yield server
    server.reset()


def frozen() -> Callable[[], float]:
    """Time stands still: a rest of 0 is over at once, any longer one lasts the whole test."""
    return lambda: 1000.0


def ticking() -> Callable[[], float]:
    """Each look at the clock is a second later: every step of a run (a model call among them)
    takes longer than a retry-after of half a second."""
    now = [1000.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    return clock


# case -> (fail_next arguments, router settings, clock, the retry-after the failover records,
# the model the next run calls first)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], Callable[[], Callable[[], float]], Any]] = {
    "retry-after-0": ({"retry_after": 0}, {}, frozen, (0, "primary")),
    "retry-after-shorter-than-a-call": ({"retry_after": 0.5}, {}, ticking, (0.5, "primary")),
    "retry-after-absent-cooldown-0": (
        {"retry_header": False},
        {"model_cooldown_s": 0},
        frozen,
        (None, "primary"),
    ),
    "retry-after-absent": ({"retry_header": False}, {}, frozen, (None, "fallback")),
    "retry-after-long": ({"retry_after": 3600}, {}, frozen, (3600, "fallback")),
}


async def answered(model: Any, llm: FakeLLM) -> ModelResponse:
    """``model``'s answer; when no model answers, the failure lists the calls the fake saw."""
    try:
        return await call(model)
    except ModelError as exc:
        seen = [(c.request.model, c.status) for c in llm.calls]
        pytest.fail(f"no model answered ({exc.message}); the model calls: {seen}")


def chain(llm: FakeLLM, provider: str, clock: Callable[[], float], **settings: Any) -> ModelRouter:
    found = router(llm, provider, **settings)
    found.cooldowns = Cooldowns(clock)
    return found


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_429_moves_on_to_the_fallback_whatever_its_retry_after(
    llm: FakeLLM, provider: str, case: str
) -> None:
    """The primary answers every call with a 429: the fallback answers the run's second call.
    The next run calls the primary first again only when its rest is over (a long retry-after
    or SB_MODEL_COOLDOWN_S is respected across runs)."""
    failure, settings, clock, (retry_after, next_first) = CASES[case]
    models = chain(llm, provider, clock(), model_fallbacks=[f"{provider}:fallback"], **settings)
    llm.fail_next(429, 6, provider=provider, model="primary", **failure)
    bound = models.bind("main")
    response = await answered(bound, llm)
    assert response.text == "fallback answered"
    assert [(c.request.model, c.status) for c in llm.calls] == [
        ("primary", 429),
        ("fallback", 200),
    ]
    [move] = bound.failovers
    assert (move.from_ref, move.to_ref, move.reason) == (
        f"{provider}:primary",
        f"{provider}:fallback",
        "rate_limit",
    )
    assert move.retry_after_s == retry_after
    llm.reset()  # the primary answers again
    again = await answered(models.bind("main"), llm)
    assert again.text == f"{next_first} answered"
    assert [c.request.model for c in llm.calls] == [next_first]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_failed_model_is_called_again_only_after_every_other(
    llm: FakeLLM, provider: str
) -> None:
    """Three models, each free again at once after its 429: the run goes down the chain, and
    comes back to a model only after the others, the one that failed longest ago first."""
    fallbacks = [f"{provider}:second", f"{provider}:third"]
    models = chain(llm, provider, frozen(), model_fallbacks=fallbacks)
    for model in ("primary", "second"):
        llm.fail_next(429, 6, provider=provider, model=model, retry_after=0)
    assert (await answered(models.bind("main"), llm)).text == "third answered"
    assert [c.request.model for c in llm.calls] == ["primary", "second", "third"]

    llm.reset()
    llm.fail_next(429, 6, provider=provider, retry_after=0)  # every model, every call
    bound = models.bind("main")
    with pytest.raises(ModelRateLimitError):
        await call(bound)
    order = ["primary", "second", "third"] * 2  # SB_MODEL_MAX_ATTEMPTS: 6
    assert [c.request.model for c in llm.calls] == order
    assert [m.to_ref.partition(":")[2] for m in bound.failovers] == order[1:]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_failure_moves_on_for_the_rest_of_the_run(llm: FakeLLM, provider: str) -> None:
    """A run's later model calls (after a tool call, say) start with the model that answered,
    not with the one that failed in this run; a lone model is called again at once."""
    models = chain(llm, provider, frozen(), model_fallbacks=[f"{provider}:fallback"])
    llm.fail_next(429, provider=provider, model="primary", retry_after=0)
    bound = models.bind("main")
    assert (await answered(bound, llm)).text == "fallback answered"
    assert (await answered(bound, llm)).text == "fallback answered"
    assert [c.request.model for c in llm.calls] == ["primary", "fallback", "fallback"]

    llm.reset()
    alone = chain(llm, provider, frozen())
    llm.fail_next(429, provider=provider, retry_after=0)
    assert (await answered(alone.bind("main"), llm)).text == "primary answered"
    assert [c.status for c in llm.calls] == [429, 200]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_429_with_profiles_moves_to_the_next_model_and_a_key_to_the_next_profile(
    llm: FakeLLM, provider: str
) -> None:
    """A 429 rests the model (every profile of it): the next model answers, not the model's
    next profile. A refused key rests its profile: with SB_AUTH_COOLDOWN_S=0 it is free again
    at once, and the backup profile is still the next one called."""
    profiles = {provider: [{"name": "backup", "api_key": KEY_B}]}
    models = chain(
        llm,
        provider,
        frozen(),
        model_fallbacks=[f"{provider}:fallback"],
        auth_profiles=profiles,
        auth_cooldown_s=0,
    )
    llm.fail_next(429, 6, provider=provider, model="primary", retry_after=0)
    bound = models.bind("main")
    assert (await answered(bound, llm)).text == "fallback answered"
    assert [(c.request.model, c.status) for c in llm.calls] == [
        ("primary", 429),
        ("fallback", 200),
    ]
    assert (bound.failovers[0].from_profile, bound.failovers[0].to_profile) == (
        "default",
        "default",
    )

    llm.reset()
    llm.fail_next(401, 6, provider=provider, key=KEY_A)
    bound = models.bind("main")
    assert (await answered(bound, llm)).text == "primary answered"
    [move] = bound.failovers
    assert move.reason == "auth" and move.from_ref == move.to_ref == f"{provider}:primary"
    assert (move.from_profile, move.to_profile) == ("default", "backup")

    llm.reset()
    llm.fail_next(401, 6, provider=provider)  # both keys refused: on to the next model
    bound = models.bind("main")
    with pytest.raises(ModelAuthError):
        await call(bound)
    assert [c.request.model for c in llm.calls] == [
        "primary",
        "primary",
        "fallback",
        "fallback",
        "primary",
        "primary",
    ]
    tried = [(m.to_ref.partition(":")[2], m.to_profile) for m in bound.failovers]
    assert tried == [
        ("primary", "backup"),
        ("fallback", "default"),
        ("fallback", "backup"),
        ("primary", "default"),
        ("primary", "backup"),
    ]
