"""A run marked interrupted stops at its next streamed delta even when the task's cancellation
never arrived (Python 3.11's ``asyncio.wait_for`` can drop one that lands as its awaitable
completes; an aborted run then streamed on to ``end_turn`` in a CI run)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchboard_agent.providers.base import ModelRequest, ModelResponse, TextDelta, Usage
from switchboard_agent.runs.model_call import call_model
from switchboard_agent.runs.queueing import RunControl


class CountingModel:
    """Streams ``n`` deltas, counting how many the caller took."""

    provider = "test"
    model = "counting"

    def __init__(self, n: int) -> None:
        self.n = n
        self.taken = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        for i in range(self.n):
            self.taken += 1
            yield TextDelta(f"word{i} ")
        yield ModelResponse([{"type": "text", "text": "all"}], "end_turn", Usage(1, 1), self.model)


class Events:
    def __init__(self) -> None:
        self.deltas: list[str] = []

    async def delta(self, text: str) -> None:
        self.deltas.append(text)


async def test_an_interrupted_run_stops_streaming_without_a_cancellation() -> None:
    control = RunControl(None, "subject", None, steer=False)  # type: ignore[arg-type]
    model, events = CountingModel(40), Events()
    reply: list[str] = []
    request = ModelRequest(system="s", messages=[{"role": "user", "content": "hi"}])
    call: Any = call_model(request, events, reply, model, control)  # type: ignore[arg-type]
    task = asyncio.ensure_future(call)
    control.interrupted = True  # as RunningRuns.abort does, but its task.cancel() was lost
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.taken == 1 and events.deltas == []
