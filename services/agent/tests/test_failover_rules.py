"""The failover rules one call follows (switchboard_agent.providers.failover), step by step: which
model and key is picked next, how long each failure rests what, the wait when everything rests, the
error when nothing can answer, the record of each move. The models are a provider plugin's
(the real plugin path) whose calls follow a script, and the cooldowns' clock is scripted, so
every rule is checked at its exact boundary without a network or a wait."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from switchboard.v1 import messages_pb2
from switchboard_agent.outbound.events import RunEvents
from switchboard_agent.providers.base import ModelRequest, ModelResponse, TextDelta, Usage
from switchboard_agent.providers.chain import ModelChain
from switchboard_agent.providers.errors import (
    ModelAuthError,
    ModelContextOverflowError,
    ModelError,
    ModelRateLimitError,
    ModelUnavailableError,
)
from switchboard_agent.providers.failover import (
    Failover,
    ModelRouter,
    RouterTuning,
    failover_reason,
)
from switchboard_agent.providers.plugin import PluginProvider
from switchboard_agent.providers.profiles import AuthProfile, Cooldowns


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A provider's model as a plugin's factory returns it: each call takes the next step of
    its script (a step ``("text", error)`` streams the text, then fails)."""

    def __init__(self, model: str, steps: list[Any], calls: list[str]) -> None:
        self.provider, self.model = "p", model
        self.steps = steps
        self.calls = calls

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        self.calls.append(self.model)
        step = self.steps.pop(0)
        if isinstance(step, tuple):
            yield TextDelta(step[0])
            raise step[1]
        if isinstance(step, Exception):
            raise step
        yield TextDelta(step)
        text = [{"type": "text", "text": step}]
        yield ModelResponse(text, "end_turn", Usage(), self.model)


class Setup:
    def __init__(
        self,
        scripts: Mapping[str, list[Any]],
        chain: Sequence[str] = ("p:a", "p:b"),
        keys: Sequence[str] = ("k1",),
        per_agent: Mapping[str, tuple[str, ...]] | None = None,
        **tuning: Any,
    ) -> None:
        self.clock = Clock()
        self.calls: list[str] = []
        self.slept: list[float] = []
        self.scripts = {name: list(steps) for name, steps in scripts.items()}

        def factory(model: str, config: Mapping[str, Any]) -> Scripted:
            if model not in self.scripts:
                raise RuntimeError("no such model")
            return Scripted(model, self.scripts[model], self.calls)

        async def sleep(seconds: float) -> None:
            self.slept.append(seconds)
            self.clock.now += seconds

        self.profiles = {"p": [AuthProfile("p", name, f"secret-{name}", None) for name in keys]}
        plugin = PluginProvider("scripted", "p", factory, {})
        self.router = ModelRouter(
            ModelChain(tuple(chain), per_agent or {}),
            self.profiles,
            RouterTuning(**tuning),
            Cooldowns(self.clock),
            sleep=sleep,
            plugins={"p": plugin},
        )


def request() -> ModelRequest:
    return ModelRequest(system="", messages=[{"role": "user", "content": "hi"}])


async def answer(model: Any) -> str:
    text = ""
    async for item in model.stream(request()):
        if isinstance(item, ModelResponse):
            text = item.text
    return text


def limited(retry_after: float | None = None, status: int = 429) -> ModelRateLimitError:
    return ModelRateLimitError(
        "slow down", provider="p", status_code=status, retry_after_s=retry_after
    )


def failovers(frm: str, to: str, reason: str) -> float:
    labels = {"from": frm, "to": to, "reason": reason}
    return REGISTRY.get_sample_value("sb_agent_failovers_total", labels) or 0.0


def test_which_errors_move_the_call_on() -> None:
    assert failover_reason(ModelAuthError("no", status_code=401)) == "auth"
    assert failover_reason(limited()) == "rate_limit"
    for status, reason in ((503, "overloaded"), (529, "overloaded"), (500, "unavailable")):
        assert failover_reason(ModelUnavailableError("x", status_code=status)) == reason
    assert failover_reason(ModelUnavailableError("x")) == "unavailable"
    assert failover_reason(ModelContextOverflowError("x")) == "context_overflow"
    assert failover_reason(ModelError("bad request", status_code=400)) is None


def test_a_move_is_recorded_with_every_detail() -> None:
    move = Failover("p:a", "p:b", "rate_limit", "k1", "k2", 429, 2.5, 1.23456)
    assert move.data() == {
        "from": "p:a",
        "to": "p:b",
        "reason": "rate_limit",
        "from_profile": "k1",
        "to_profile": "k2",
        "status": 429,
        "retry_after_s": 2.5,
        "waited_s": 1.235,
    }


def test_what_each_failure_rests() -> None:
    s = Setup({}, keys=("k1", "k2"), cooldown_s=5, auth_cooldown_s=3600)
    r, [k1, k2] = s.router, s.profiles["p"]
    assert r.rest("p:a", k1, ModelAuthError("no")) == "profile:p/k1"
    assert r.cooldowns.remaining("profile:p/k1") == 3600
    assert r.cooldowns.remaining("model:p:a") == 0  # a refused key: the model is fine
    assert r.rest("p:a", k2, limited(7)) == "model:p:a"
    assert r.cooldowns.remaining("model:p:a") == 7
    assert r.rest("p:b", k2, ModelUnavailableError("down", status_code=503)) == "model:p:b"
    assert r.cooldowns.remaining("model:p:b") == 5  # no retry-after: cooldown_s
    assert r.rest("p:b", k2, ModelError("bad request")) is None
    assert r.rest("p:b", k2, ModelContextOverflowError("long")) is None


def test_pick_takes_the_first_free_pair_then_the_oldest_failure() -> None:
    s = Setup({}, chain=("p:a", "p:b", "p:c"), keys=("k1", "k2"))
    r, [k1, k2] = s.router, s.profiles["p"]
    refs = ("p:a", "p:b", "p:c")
    assert r.pick(refs) == ("p:a", k1)
    r.cooldowns.cool("profile:p/k1", 10)
    assert r.pick(refs) == ("p:a", k2)  # the model's next key
    r.cooldowns.cool("model:p:a", 10)
    assert r.pick(refs) == ("p:b", k2)
    # Failed in this run (free again at once): the chain moves on, then the oldest failure.
    s.clock.now += 20
    failed = {"model:p:a": 2, "model:p:b": 1, "model:p:c": 3}
    assert r.pick(refs, failed) == ("p:b", k1)
    # Of two pairs that failed as long ago, one not called yet goes first.
    assert r.pick(refs, failed, tried={("p:b", "p/k1")}) == ("p:b", k2)
    r.cooldowns.cool("model:p:a", 5)
    r.cooldowns.cool("model:p:b", 5)
    r.cooldowns.cool("model:p:c", 5)
    assert r.pick(refs, failed) is None


def test_next_free_is_the_first_model_and_key_to_wake() -> None:
    s = Setup({}, chain=("p:a", "p:b"), keys=("k1", "k2"))
    r = s.router
    r.cooldowns.cool("model:p:a", 30)
    r.cooldowns.cool("profile:p/k1", 50)
    r.cooldowns.cool("profile:p/k2", 20)
    r.cooldowns.cool("model:p:b", 10)
    # p:a: its model rests 30 s, its best key 20 s -> 30; p:b: 10 s, keys 20 s -> 20.
    assert r.next_free_s(("p:a", "p:b")) == 20


async def test_a_429_moves_on_and_the_move_is_recorded() -> None:
    s = Setup({"a": [limited(0)], "b": ["from b"]}, cooldown_s=5)
    before = failovers("p:a", "p:b", "rate_limit")
    routed = s.router.bind("")
    assert await answer(routed) == "from b"
    assert s.calls == ["a", "b"]
    assert (routed.ref, routed.provider, routed.model) == ("p:b", "p", "b")
    [move] = routed.failovers
    assert move == Failover("p:a", "p:b", "rate_limit", "k1", "k1", 429, 0, 0.0)
    assert failovers("p:a", "p:b", "rate_limit") == before + 1


async def test_a_refused_key_moves_to_the_next_key_of_the_same_model() -> None:
    s = Setup({"a": [ModelAuthError("no", status_code=401), "a with k2"]}, keys=("k1", "k2"))
    routed = s.router.bind("")
    assert await answer(routed) == "a with k2"
    [move] = routed.failovers
    assert (move.from_profile, move.to_profile, move.reason, move.status) == (
        "k1",
        "k2",
        "auth",
        401,
    )


async def test_when_everything_rests_the_call_waits_up_to_max_wait() -> None:
    s = Setup({"a": [limited(3), "a again"], "b": [limited(4)]}, max_wait_s=3)
    routed = s.router.bind("")
    assert await answer(routed) == "a again"
    assert s.slept == [3]
    assert routed.failovers[-1].waited_s == 3
    assert s.calls == ["a", "b", "a"]


async def test_past_max_wait_the_providers_error_says_when_it_is_free() -> None:
    s = Setup({"a": [limited(40)], "b": [limited(50, status=529)]}, max_wait_s=30)
    with pytest.raises(ModelRateLimitError) as caught:
        await answer(s.router.bind(""))
    error = caught.value
    assert error.message == (
        "slow down Every configured model is resting; the first is free again in 40 s."
    )
    assert (error.provider, error.status_code, error.retry_after_s) == ("p", 529, 50)
    assert s.slept == []


async def test_resting_from_an_earlier_run_says_so() -> None:
    s = Setup({"a": ["never"], "b": ["never"]}, max_wait_s=30)
    s.router.cooldowns.cool("model:p:a", 40)
    s.router.cooldowns.cool("model:p:b", 45)
    with pytest.raises(ModelUnavailableError) as caught:
        await answer(s.router.bind(""))
    assert caught.value.message == (
        "Every configured model is resting after earlier failures; the first is free again in 40 s."
    )
    assert s.calls == []


async def test_nothing_moves_once_text_has_streamed() -> None:
    s = Setup({"a": [("partial", limited(0))], "b": ["from b"]})
    routed = s.router.bind("")
    with pytest.raises(ModelRateLimitError):
        await answer(routed)
    assert (s.calls, routed.failovers) == (["a"], [])


async def test_a_bad_request_is_not_failed_over() -> None:
    s = Setup({"a": [ModelError("bad request", status_code=400)], "b": ["from b"]})
    with pytest.raises(ModelError, match="bad request"):
        await answer(s.router.bind(""))
    assert s.calls == ["a"]
    assert s.router.cooldowns.remaining("model:p:a") == 0


async def test_a_context_overflow_is_shrunk_once_on_the_same_model() -> None:
    s = Setup({"a": [ModelContextOverflowError("long"), "short enough"]})
    routed = s.router.bind("")
    shrunk: list[ModelRequest] = []

    async def shrink(req: ModelRequest) -> ModelRequest:
        shrunk.append(req)
        return req

    routed.on_overflow = shrink
    assert await answer(routed) == "short enough"
    assert (s.calls, len(shrunk)) == (["a", "a"], 1)
    s2 = Setup({"a": [ModelContextOverflowError("long"), ModelContextOverflowError("still")]})
    again = s2.router.bind("")
    again.on_overflow = shrink
    with pytest.raises(ModelContextOverflowError, match="still"):
        await answer(again)


async def test_attempts_are_bounded_and_the_last_error_is_raised() -> None:
    steps = [ModelUnavailableError(f"down {i}", status_code=500) for i in range(4)]
    s = Setup({"a": steps[0::2], "b": steps[1::2]}, max_attempts=3, cooldown_s=0)
    with pytest.raises(ModelUnavailableError, match=r"^down 2$"):
        await answer(s.router.bind(""))
    assert s.calls == ["a", "b", "a"]


async def test_each_agent_has_its_chain_and_the_router_is_the_defaults() -> None:
    s = Setup({"a": ["from a"], "c": ["from c"]}, per_agent={"helper": ("p:c",)})
    assert s.router.primary("helper") == "p:c"
    assert s.router.primary("") == "p:a"
    assert (s.router.provider, s.router.model) == ("p", "a")
    assert await answer(s.router.bind("helper")) == "from c"
    assert await answer(s.router) == "from a"


def test_warm_builds_every_client_once_and_notes_a_plugin_that_fails() -> None:
    s = Setup({"a": []}, chain=("p:a", "p:missing"))
    s.router.warm()
    profile = s.profiles["p"][0]
    assert s.router.instance("p:a", profile) is s.router.instance("p:a", profile)
    assert s.router.unbuilt == {
        "scripted": "The model p:missing (plugin scripted) could not be set up (RuntimeError)."
    }


async def test_a_move_is_told_on_the_span_in_the_log_and_as_a_run_event(
    module_nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    nc = await nats.connect(module_nats_url)
    try:
        seen: list[messages_pb2.AgentEvent] = []

        async def on_event(msg: Msg) -> None:
            seen.append(messages_pb2.AgentEvent.FromString(msg.data))

        await nc.subscribe("test.events", cb=on_event)
        events = RunEvents(nc, "test.events", "run-1", "s:1", "m-1", ["m-1"])
        down = ModelUnavailableError("overloaded", status_code=503)
        s = Setup({"a": [limited(2)], "b": [down], "c": ["ok"]}, chain=("p:a", "p:b", "p:c"))
        caplog.set_level(logging.WARNING, logger="switchboard_agent.providers.failover")
        with provider.get_tracer("test").start_as_current_span("llm.call"):
            assert await answer(s.router.bind("", events)) == "ok"
        await nc.flush()
        deadline = time.monotonic() + 30
        while len(seen) < 2:
            assert time.monotonic() < deadline, "the failover events never came"
            await asyncio.sleep(0.01)
    finally:
        await nc.close()
    [span] = exporter.get_finished_spans()
    assert span.attributes is not None
    attributes = {k: v for k, v in span.attributes.items() if k.startswith("sb.failover.")}
    assert attributes == {
        "sb.failover.count": 2,
        "sb.failover.from": "p:b",
        "sb.failover.to": "p:c",
        "sb.failover.reason": "overloaded",
    }
    [first, second] = [e for e in span.events if e.name == "failover"]
    assert dict(first.attributes or {}) == {
        "from": "p:a",
        "to": "p:b",
        "reason": "rate_limit",
        "from_profile": "k1",
        "to_profile": "k1",
        "status": 429,
        "retry_after_s": 2,
        "waited_s": 0.0,
    }
    assert dict(second.attributes or {})["reason"] == "overloaded"
    assert "retry_after_s" not in dict(second.attributes or {})  # None: left out of the event
    logged = [r.getMessage() for r in caplog.records if "failover" in r.getMessage()]
    assert logged == [
        "model failover p:a -> p:b (rate_limit)",
        "model failover p:b -> p:c (overloaded)",
    ]
    assert [(e.stream, e.phase, e.model) for e in seen] == [
        ("lifecycle", "failover", "p:b"),
        ("lifecycle", "failover", "p:c"),
    ]
    assert json.loads(seen[0].data_json)["retry_after_s"] == 2


async def test_a_model_name_may_hold_a_colon() -> None:
    # "provider:model" splits at the first colon: Ollama-style tags stay in the model's name.
    s = Setup({"llama3:8b": [limited(5), "tagged"]}, chain=("p:llama3:8b",), max_wait_s=10)
    routed = s.router.bind("")
    assert (s.router.provider, s.router.model) == ("p", "llama3:8b")
    assert (routed.provider, routed.model) == ("p", "llama3:8b")
    s.router.warm()
    assert s.router.unbuilt == {}
    assert await answer(routed) == "tagged"
    assert s.slept == [5]  # the one model rested, and was called again once free
