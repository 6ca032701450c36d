"""OpenTelemetry tracing set-up and W3C trace-context helpers for NATS headers and gRPC metadata.

One process may host several services (``switchboard up`` on a laptop), and each must still
show up in traces under its own ``service.name``. So the process's tracer provider
(:class:`ServiceTracerProvider`, installed once) hands out tracers that start each span with the
SDK provider of the service running the current task: :class:`ServiceRuntime` marks its task
with :func:`enter_service`, and the tasks it starts (NATS callbacks, gRPC and HTTP handlers)
inherit the mark. Code keeps using ``trace.get_tracer(__name__)`` as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from .settings import CommonSettings

_SERVICE: ContextVar[str] = ContextVar("sb_service", default="")
_NOOP = trace.NoOpTracer()


def enter_service(key: str) -> None:
    """Mark the current task (and the tasks it starts from now on) as running ``key``'s code."""
    _SERVICE.set(key)


def current_service() -> str:
    return _SERVICE.get()


class ServiceTracerProvider(trace.TracerProvider):
    """The process's tracer provider: one SDK provider per hosted service, chosen per span."""

    def __init__(self) -> None:
        self.providers: dict[str, TracerProvider] = {}

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Any = None,
    ) -> trace.Tracer:
        return _ServiceTracer(self, instrumenting_module_name, instrumenting_library_version)


class _ServiceTracer(trace.Tracer):
    def __init__(self, owner: ServiceTracerProvider, name: str, version: str | None) -> None:
        self._owner = owner
        self._name = name
        self._version = version
        self._tracers: dict[str, tuple[TracerProvider, trace.Tracer]] = {}

    def _tracer(self) -> trace.Tracer:
        key = _SERVICE.get()
        provider = self._owner.providers.get(key)
        if provider is None:
            return _NOOP
        cached = self._tracers.get(key)
        if cached is None or cached[0] is not provider:  # a restarted service has a new one
            cached = (provider, provider.get_tracer(self._name, self._version))
            self._tracers[key] = cached
        return cached[1]

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self._tracer().start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        return self._tracer().start_as_current_span(*args, **kwargs)


_PROCESS_PROVIDER: list[ServiceTracerProvider] = []  # set once per process by install_tracing


def install_tracing() -> ServiceTracerProvider:
    """Install the process's tracer provider (once; later calls return it)."""
    if not _PROCESS_PROVIDER:
        provider = ServiceTracerProvider()
        trace.set_tracer_provider(provider)
        _PROCESS_PROVIDER.append(provider)
    return _PROCESS_PROVIDER[0]


class Telemetry:
    """The tracer provider of one service (within its process)."""

    def __init__(self, key: str, provider: TracerProvider) -> None:
        self.key = key
        self.provider = provider

    def shutdown(self) -> None:
        self.provider.force_flush(timeout_millis=3000)
        self.provider.shutdown()
        providers = install_tracing().providers
        if providers.get(self.key) is self.provider:
            del providers[self.key]


def setup_telemetry(key: str, service_name: str, settings: CommonSettings) -> Telemetry:
    """Give service ``key`` (its instance name) its tracer provider: ``service_name`` as the
    resource's ``service.name``; export over OTLP when an endpoint is set."""
    attributes = {"service.name": service_name, "service.namespace": "switchboard"}
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
    install_tracing().providers[key] = provider
    return Telemetry(key, provider)


def inject_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    """Return ``headers`` with the current W3C trace context added."""
    carrier = dict(headers or {})
    propagate.inject(carrier)
    return carrier


def extract_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    return propagate.extract(dict(headers or {}))
