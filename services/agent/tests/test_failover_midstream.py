"""Nothing fails over once text has streamed (providers/failover.py): text that reached the user
cannot be taken back, so a stream that breaks after its first text delta ends the call with the
error and no other model is called; a stream that breaks before any text fails over like an HTTP
error. Both wire formats, both ways a stream breaks (the connection drops; an error event
arrives inside the 200 stream), through the real SDKs against the fake LLM."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from switchboard.settings import ModelSettings
from switchboard_agent.providers import (
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelUnavailableError,
    TextDelta,
)
from switchboard_agent.providers.failover import ModelRouter, RoutedModel
from switchboard_agent.providers.failover_config import FailoverSettings, choose_router
from tests.fakes.llm import FakeLLM, FakeRequest, Reply

KEY_A = "sk-profile-a-0123456789"
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


PARTIAL = "Here is the first half of "
OVERLOADED = {"anthropic": 529, "openai": 503}
BREAKS = ["drop", "error-event"]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLM]:
    with FakeLLM(answer) as llm:
        yield llm


@pytest.fixture
def llm(server: FakeLLM) -> Iterator[FakeLLM]:
    server.reset()
    yield server
    server.reset()


def break_primary(llm: FakeLLM, provider: str, how: str, text: str) -> int:
    """The primary's next stream sends ``text`` and breaks; the status the fake records."""
    status = None if how == "drop" else OVERLOADED[provider]
    llm.break_stream_next(text=text, status=status, provider=provider, model="primary")
    return status or 0


async def consume(model: RoutedModel, seen: list[str]) -> ModelResponse:
    """Read the call as the runner does: each delta is the user's as soon as it arrives."""
    final = None
    async for item in model.stream(request()):
        if isinstance(item, TextDelta):
            seen.append(item.text)
        else:
            final = item
    assert final is not None
    return final


@pytest.mark.parametrize("how", BREAKS)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_nothing_fails_over_once_text_has_streamed(
    llm: FakeLLM, provider: str, how: str
) -> None:
    models = router(llm, provider, model_fallbacks=[f"{provider}:fallback"])
    status = break_primary(llm, provider, how, PARTIAL)
    bound = models.bind("main")
    seen: list[str] = []
    raised: Exception | None = None
    try:
        await consume(bound, seen)
    except ModelError as exc:
        raised = exc
    assert [(c.request.model, c.status) for c in llm.calls] == [("primary", status)]
    assert "".join(seen) == PARTIAL  # the text reached the client, and nothing after it
    assert not bound.failovers
    assert f"{bound.provider}:{bound.model}" == f"{provider}:primary"
    assert raised is not None, "the call ended as if the broken stream had answered"
    # A ModelError the runner shows (a dropped Anthropic stream surfaced raw before 2026-11-28).
    assert isinstance(raised, ModelUnavailableError), raised
    if how == "error-event":  # the provider's own error
        assert raised.status_code == status
    # The model's rest is not touched: the next run starts with the primary again.
    llm.reset()
    assert (await consume(models.bind("main"), [])).text == "primary answered"
    assert [c.request.model for c in llm.calls] == ["primary"]


@pytest.mark.parametrize(
    ("provider", "how"),
    [
        ("anthropic", "drop"),
        ("anthropic", "error-event"),
        ("openai", "drop"),
        ("openai", "error-event"),
    ],
)
async def test_a_stream_that_breaks_before_any_text_fails_over(
    llm: FakeLLM, provider: str, how: str
) -> None:
    models = router(llm, provider, model_fallbacks=[f"{provider}:fallback"])
    status = break_primary(llm, provider, how, "")
    bound = models.bind("main")
    seen: list[str] = []
    try:
        response = await consume(bound, seen)
    except ModelError as exc:
        calls = [(c.request.model, c.status) for c in llm.calls]
        pytest.fail(f"no failover: {exc.message}; the model calls: {calls}")
    assert response.text == "".join(seen) == "fallback answered"
    assert [(c.request.model, c.status) for c in llm.calls] == [
        ("primary", status),
        ("fallback", 200),
    ]
    [move] = bound.failovers
    assert (move.from_ref, move.to_ref) == (f"{provider}:primary", f"{provider}:fallback")
    assert move.reason == ("unavailable" if how == "drop" else "overloaded")
