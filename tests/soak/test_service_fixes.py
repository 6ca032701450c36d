"""Regression tests for the two service bugs the fault campaign found (docs/soak.md, "What
the campaign found"), each at the exact point that failed, without a cluster or a wait. Both
fail on the code before the fix."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from nats.js.errors import NoStreamResponseError

from switchboard_agent.providers.base import ModelRequest, ModelResponse, TextDelta, Usage
from switchboard_agent.providers.chain import ModelChain
from switchboard_agent.providers.errors import ModelUnavailableError
from switchboard_agent.providers.failover import ModelRouter, RouterTuning
from switchboard_agent.providers.plugin import PluginProvider
from switchboard_agent.providers.profiles import AuthProfile, Cooldowns
from switchboard_router.ordering import retrying


async def test_a_lane_append_retries_while_the_stream_elects_its_leader() -> None:
    """A clustered stream whose leader died answers "no responders" until a new one is
    elected; nats.py raises that from js.publish as NoStreamResponseError. The router's append
    must retry it holding the session's turn: it failed at once, and the session's next message
    overtook it on the lane (11 conversations out of order in a 10-minute campaign)."""
    attempts: list[int] = []

    async def append() -> int:
        attempts.append(len(attempts))
        if len(attempts) < 3:
            raise NoStreamResponseError
        return 42

    assert await retrying(append, "lane append") == 42
    assert len(attempts) == 3


class Scripted:
    """A plugin's model: each call takes the next step (an exception, or a text answer)."""

    def __init__(self, steps: list[Any]) -> None:
        self.provider, self.model = "p", "a"
        self.steps = steps

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        yield TextDelta(step)
        yield ModelResponse([{"type": "text", "text": step}], "end_turn", Usage(), "a")


async def test_a_call_waits_again_when_another_run_extends_the_rest() -> None:
    """One model, shared by the runs of an agent: a run whose call failed sleeps until the
    model's rest ends; another run's failure meanwhile rests it a little longer. The run must
    wait that out too (within SB_FAILOVER_MAX_WAIT_S) and call again: it gave up with "Every
    configured model is resting; the first is free again in 0 s", and the user got an error
    reply (a message of the campaign after a dropped model connection)."""
    now = [1000.0]
    cooldowns = Cooldowns(lambda: now[0])
    steps: list[Any] = [ModelUnavailableError("connection dropped"), "the answer"]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds
        if len(slept) == 1:
            cooldowns.cool("model:p:a", 0.5)  # another run's call failed meanwhile

    def factory(model: str, config: Mapping[str, Any]) -> Scripted:
        return Scripted(steps)

    router = ModelRouter(
        ModelChain(("p:a",), {}),
        {"p": [AuthProfile("p", "k1", "secret", None)]},
        RouterTuning(cooldown_s=5.0, max_wait_s=30.0),
        cooldowns,
        sleep=sleep,
        plugins={"p": PluginProvider("scripted", "p", factory, {})},
    )
    text = ""
    async for item in router.bind("").stream(
        ModelRequest(system="", messages=[{"role": "user", "content": "hi"}])
    ):
        if isinstance(item, ModelResponse):
            text = item.text
    assert text == "the answer"
    assert slept == [5.0, 0.5]
