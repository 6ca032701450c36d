"""Several services in one process: each task's spans and log lines belong to the service that
runs it (real runtimes on a real nats-server, exporting to a real OTLP receiver)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry import trace

from switchboard import registry
from switchboard.logs import JsonFormatter
from switchboard.runtime import ServiceRuntime
from switchboard.settings import CommonSettings
from switchboard.telemetry import current_service

from .conftest import Receiver

tracer = trace.get_tracer("test.telemetry")  # module level, as services do
log = logging.getLogger("test.telemetry")


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """Records of ``test.telemetry`` as JSON lines (the process's formatter)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter("host-process"))
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield out
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def parsed(out: io.StringIO) -> dict[str, dict[str, Any]]:
    """The JSON lines by message."""
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return {line["msg"]: line for line in lines}


@dataclass
class Run:
    """What one hosted service saw: its span contexts by name and whether it is in its span."""

    name: str
    environ: dict[str, str]
    spans: dict[str, trace.SpanContext] = field(default_factory=dict)
    inside: asyncio.Event = field(default_factory=asyncio.Event)
    worked: asyncio.Event = field(default_factory=asyncio.Event)
    service_seen: str = ""


def ids(context: trace.SpanContext) -> tuple[str, str]:
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


async def host(run: Run, other: Run, stop: asyncio.Event) -> None:
    """One service's task: a span in the task and one in a task it starts, logged inside both,
    held open until the other service is inside its own span too."""
    settings = CommonSettings.from_environ(run.environ)
    async with ServiceRuntime(registry.get(run.name), settings, stop) as rt:
        run.service_seen = current_service()
        with tracer.start_as_current_span(f"work {run.name}") as span:
            run.spans["work"] = span.get_span_context()
            run.inside.set()
            await asyncio.wait_for(other.inside.wait(), 30)  # both spans current at once
            log.info("working in %s", run.name)

            async def child() -> None:
                with tracer.start_as_current_span(f"child {run.name}") as inner:
                    run.spans["child"] = inner.get_span_context()
                    log.info("child of %s", run.name)

            await asyncio.create_task(child())
        run.worked.set()
        await rt.wait_stopped()


async def run_both(
    nats_url: str, router_env: dict[str, str], tools_env: dict[str, str]
) -> tuple[Run, Run]:
    base = {"SB_NATS_URL": nats_url, "SB_OPS_HOST": "127.0.0.1"}
    router = Run("router", {**base, **router_env})
    tools = Run("tools", {**base, **tools_env})
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(host(router, tools, stop)),
        asyncio.create_task(host(tools, router, stop)),
    ]
    for run in (router, tools):
        await asyncio.wait_for(run.worked.wait(), 60)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 60)  # each flushes its exporter on the way out
    return router, tools


async def test_each_runtime_traces_and_logs_as_its_service(
    nats_url: str, otlp: Receiver, log_lines: io.StringIO
) -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint}
    log.info("outside any service")
    with tracer.start_as_current_span("outside") as outside:
        assert not outside.get_span_context().is_valid  # no service: not traced
    router, tools = await run_both(nats_url, endpoint, endpoint)
    assert (router.service_seen, tools.service_seen) == ("router", "tools")

    names = {"work router", "child router", "work tools", "child tools"}
    spans = await otlp.until(lambda got: names <= {s.name for s in got})
    by_name = {s.name: s for s in spans}
    assert names <= set(by_name), sorted(by_name)
    assert "outside" not in by_name
    for run in (router, tools):
        for kind in ("work", "child"):
            span = by_name[f"{kind} {run.name}"]
            assert span.service == f"switchboard-{run.name}", (kind, run.name)
            assert (span.trace_id, span.span_id) == ids(run.spans[kind])
        assert by_name[f"child {run.name}"].parent_id == ids(run.spans["work"])[1]
    assert by_name["work router"].trace_id != by_name["work tools"].trace_id

    lines = parsed(log_lines)
    assert lines["outside any service"]["service"] == "host-process"
    assert "trace_id" not in lines["outside any service"]
    for run in (router, tools):
        for message, kind in (
            (f"working in {run.name}", "work"),
            (f"child of {run.name}", "child"),
        ):
            line = lines[message]
            assert line["service"] == run.name, line
            assert (line["trace_id"], line["span_id"]) == ids(run.spans[kind]), line
            assert line["logger"] == "test.telemetry" and line["level"] == "INFO"


async def test_otel_service_name_overrides_the_registry_name(nats_url: str, otlp: Receiver) -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint}
    await run_both(nats_url, {**endpoint, "OTEL_SERVICE_NAME": "my-router"}, endpoint)
    spans = await otlp.until(lambda got: {"work router", "work tools"} <= {s.name for s in got})
    by_name = {s.name: s.service for s in spans}
    assert by_name.get("work router") == "my-router"
    assert by_name.get("work tools") == "switchboard-tools"  # only its own process setting


async def test_a_restarted_service_traces_with_its_new_provider(
    nats_url: str, otlp: Receiver
) -> None:
    settings = CommonSettings.from_environ(
        {
            "SB_NATS_URL": nats_url,
            "SB_OPS_HOST": "127.0.0.1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        }
    )

    async def one_life(n: int) -> None:
        stop = asyncio.Event()
        async with ServiceRuntime(registry.get("router"), settings, stop):
            with tracer.start_as_current_span(f"life {n}"):
                pass
            stop.set()

    for n in (1, 2):
        await asyncio.create_task(one_life(n))
    spans = await otlp.until(lambda got: {"life 1", "life 2"} <= {s.name for s in got})
    assert {s.name: s.service for s in spans if s.name.startswith("life")} == {
        "life 1": "switchboard-router",
        "life 2": "switchboard-router",
    }


def test_json_formatter_fields_extras_and_exceptions() -> None:
    formatter = JsonFormatter("solo")
    record = logging.LogRecord("x.y", logging.WARNING, __file__, 1, "hello %s", ("you",), None)
    record.session = "main:api:1"
    line = json.loads(formatter.format(record))
    assert line["msg"] == "hello you" and line["service"] == "solo"
    assert line["level"] == "WARNING" and line["logger"] == "x.y"
    assert line["session"] == "main:api:1"
    assert line["ts"].endswith("Z")
    assert "trace_id" not in line
    try:
        raise ValueError("bad thing")
    except ValueError:
        import sys

        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "oops", (), sys.exc_info())
    assert "ValueError: bad thing" in json.loads(formatter.format(failed))["exc"]
