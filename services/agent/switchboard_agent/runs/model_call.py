"""One model call of a run, streamed: its text deltas go out as run events as they arrive, and
an interrupt that lost its cancellation still stops the stream (runs/runner.py)."""

from __future__ import annotations

import asyncio
import time

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from ..metrics import LLM_SECONDS, LLM_TOKENS
from ..outbound.events import RunEvents
from ..providers.base import Model, ModelRequest, ModelResponse, TextDelta
from ..providers.errors import ModelError
from ..providers.genai import describe_request, describe_response
from .queueing import RunControl

tracer = trace.get_tracer("switchboard.agent")


def stop_if_interrupted(control: RunControl) -> None:
    """Raise the cancellation an abort or a newer message asked for, if it was lost: on
    Python 3.11 ``asyncio.wait_for`` drops a cancellation that lands as its awaitable
    completes (seen once in CI: an aborted run streamed on to ``end_turn``). The run's own
    handler turns it into ``interrupted``."""
    if control.interrupted:
        raise asyncio.CancelledError


async def stream_text(text: str, events: RunEvents, reply: list[str]) -> None:
    """Add ``text`` to the reply and send it as a delta event."""
    reply.append(text)
    await events.delta(text)


async def call_model(
    request: ModelRequest,
    events: RunEvents,
    reply: list[str],
    model: Model,
    control: RunControl,
) -> ModelResponse:
    """The model's response to ``request``, its text streamed to ``reply`` and ``events`` (a
    blank line before it when the reply already has text)."""
    start = time.perf_counter()
    with tracer.start_as_current_span("llm.call", kind=SpanKind.CLIENT) as span:
        describe_request(span, model, request)
        first = True
        response: ModelResponse | None = None
        async for event in model.stream(request):
            stop_if_interrupted(control)
            if isinstance(event, TextDelta):
                if first and reply:
                    await stream_text("\n\n", events, reply)
                first = False
                await stream_text(event.text, events, reply)
            else:
                response = event
        if response is None:
            raise ModelError("the model stream ended without a response")
        describe_response(span, response)
    LLM_SECONDS.labels(model.provider, model.model).observe(time.perf_counter() - start)
    LLM_TOKENS.labels(model.provider, model.model, "input").inc(response.usage.input_tokens)
    LLM_TOKENS.labels(model.provider, model.model, "output").inc(response.usage.output_tokens)
    return response
