"""The OpenTelemetry GenAI semantic-convention attributes of a model call's span (``llm.call``),
in one place for the tool loop (runs/runner.py) and compaction (compaction/compactor.py).

https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/: ``gen_ai.provider.name``
is the current name of the provider; ``gen_ai.system`` (its name before semconv 1.37) is set
too, for trace backends that still read it. Message contents are never recorded (they may hold
secrets; the conventions make them opt-in)."""

from __future__ import annotations

from opentelemetry.trace import Span

from .base import Model, ModelRequest, ModelResponse

OPERATION = "chat"  # every call is a chat completion (Messages / Chat Completions)


def describe_request(span: Span, model: Model, request: ModelRequest) -> None:
    """What is known before the call: operation, provider, requested model, token cap."""
    span.set_attribute("gen_ai.operation.name", OPERATION)
    span.set_attribute("gen_ai.provider.name", model.provider)
    span.set_attribute("gen_ai.system", model.provider)
    span.set_attribute("gen_ai.request.model", model.model)
    span.set_attribute("gen_ai.request.max_tokens", request.max_tokens)


def describe_response(span: Span, response: ModelResponse) -> None:
    """What the provider answered: the model that answered, token usage, finish reason."""
    span.set_attribute("gen_ai.response.model", response.model)
    span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
    span.set_attribute("gen_ai.response.finish_reasons", [response.stop_reason])
