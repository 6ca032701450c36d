"""A model call's span carries the OpenTelemetry GenAI semantic-convention attributes: a real
call through each provider's SDK to the fake LLM, described by providers/genai.py on a span recorded
by an in-memory exporter (a tracer provider of the test's own, not the process's global one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from switchboard_agent.providers import (
    AnthropicModel,
    Model,
    ModelRequest,
    ModelResponse,
    OpenAIChatModel,
)
from switchboard_agent.providers.genai import describe_request, describe_response
from tests.fakes.llm import FakeLLM, tool_then_text

KEY = "sk-test-key-0123456789abcdef"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(tool_then_text()) as server:
        yield server


def make_model(llm: FakeLLM, provider: str) -> Model:
    if provider == "anthropic":
        return AnthropicModel("claude-test", KEY, llm.base_url, max_retries=0)
    return OpenAIChatModel("gpt-test", KEY, f"{llm.base_url}/v1", max_retries=0)


async def traced_call(model: Model, request: ModelRequest) -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("llm.call") as span:
        describe_request(span, model, request)
        response: ModelResponse | None = None
        async for event in model.stream(request):
            if isinstance(event, ModelResponse):
                response = event
        assert response is not None
        describe_response(span, response)
    (finished,) = exporter.get_finished_spans()
    return finished


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_model_call_span_carries_the_genai_attributes(llm: FakeLLM, provider: str) -> None:
    model = make_model(llm, provider)
    request = ModelRequest(
        system="be brief",
        messages=[{"role": "user", "content": [{"type": "text", "text": "what time is it?"}]}],
        max_tokens=256,
    )
    span = await traced_call(model, request)
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == provider
    assert attributes["gen_ai.system"] == provider  # the pre-1.37 name, for older backends
    assert attributes["gen_ai.request.model"] == model.model
    assert attributes["gen_ai.request.max_tokens"] == 256
    # What the provider answered (the fake model names the requested model back).
    assert attributes["gen_ai.response.model"] == model.model
    usage = (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"])
    assert all(isinstance(tokens, int) and tokens > 0 for tokens in usage), usage
    # tool_then_text answers the first call with a tool call.
    assert attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    # Nothing of the conversation is recorded.
    assert not [v for v in attributes.values() if "what time" in str(v) or "be brief" in str(v)]
