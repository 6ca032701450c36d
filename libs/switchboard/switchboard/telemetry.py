"""OpenTelemetry tracing set-up and W3C trace-context helpers for NATS headers and gRPC metadata."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from .settings import CommonSettings


class Telemetry:
    """Owns the tracer provider of one service process."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider

    def shutdown(self) -> None:
        self.provider.force_flush(timeout_millis=3000)
        self.provider.shutdown()


def setup_telemetry(service: str, settings: CommonSettings) -> Telemetry:
    """Install the process-wide tracer provider; export over OTLP when an endpoint is set."""
    attributes = {"service.name": f"switchboard-{service}", "service.namespace": "switchboard"}
    if settings.instance:
        attributes["service.instance.id"] = settings.instance
    provider = TracerProvider(resource=Resource.create(attributes))
    if settings.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        endpoint = settings.otlp_endpoint
        insecure = endpoint.startswith("http://") or "://" not in endpoint
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=insecure))
        )
    trace.set_tracer_provider(provider)
    return Telemetry(provider)


def inject_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    """Return ``headers`` with the current W3C trace context added."""
    carrier = dict(headers or {})
    propagate.inject(carrier)
    return carrier


def extract_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    return propagate.extract(dict(headers or {}))
