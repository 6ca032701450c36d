"""One run of a due job (switchboard_scheduler.firing: ``attempt`` and ``_execute``) against a
real nats-server: published once per slot (a second try is the stream's duplicate), a bus that
does not take the event leaves the run due for the same slot and says so, an action that fails
is recorded as the run's error; each counted by kind and outcome, and traced as a
``scheduler.fire`` producer span naming the job."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import REGISTRY

from switchboard import bus
from switchboard_scheduler import firing as firing_module
from switchboard_scheduler.actions import Actions
from switchboard_scheduler.errors import BusUnavailable
from switchboard_scheduler.firing import Firing
from switchboard_scheduler.jobs import Job

SLOT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
async def nc(module_nats_url: str) -> AsyncIterator[NATS]:
    conn = await nats.connect(module_nats_url)
    await bus.ensure_streams(conn.jetstream(), bus.Subjects())
    try:
        yield conn
    finally:
        await conn.close()


def firing(nc: NATS, root: Path) -> Firing:
    actions = Actions(nc.jetstream(), bus.Subjects(), None, root, 1000)  # type: ignore[arg-type]
    return Firing(
        None,  # type: ignore[arg-type]  # attempt and _execute do not reach the store
        actions,
        {},
        batch=10,
        concurrency=2,
        grace_s=60,
        poll_s=5,
    )


def fires(kind: str, outcome: str) -> float:
    labels = {"kind": kind, "outcome": outcome}
    return REGISTRY.get_sample_value("sb_scheduler_fires_total", labels) or 0.0


def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """The spans firing starts, on a tracer of the test's own (the process's provider is left
    to the services: it is set once per process)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(firing_module, "tracer", provider.get_tracer("test"))
    return exporter


async def test_a_run_is_published_once_per_slot_and_traced(
    nc: NATS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = firing(nc, tmp_path)
    name = f"j-{tmp_path.name}"
    job = Job(name=name, kind="message", agent="main", message="hi", every_ms=60_000)
    exporter = spans(monkeypatch)
    published, duplicate = fires("message", "published"), fires("message", "duplicate")
    outcome, error = await f.attempt(job, SLOT)
    assert outcome is not None and (outcome.result, outcome.published, error) == (
        "published",
        True,
        "",
    )
    again, _ = await f.attempt(job, SLOT)  # the same slot again: the stream drops it
    assert again is not None and again.result == "duplicate"
    assert (fires("message", "published"), fires("message", "duplicate")) == (
        published + 1,
        duplicate + 1,
    )
    fired = [s for s in exporter.get_finished_spans() if s.name == "scheduler.fire"]
    assert len(fired) == 2
    assert fired[0].kind == SpanKind.PRODUCER
    assert dict(fired[0].attributes or {}) == {"sb.job": name, "sb.job.kind": "message"}


async def test_a_bus_that_does_not_take_the_event_leaves_the_run_due(
    module_nats_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    away = await nats.connect(module_nats_url)
    f = firing(away, tmp_path)
    await away.close()
    job = Job(name="j-away", kind="message", agent="main", message="hi", every_ms=60_000)
    job.next_run = SLOT
    before = fires("message", "bus_unavailable")
    caplog.set_level(logging.WARNING, logger="switchboard_scheduler.firing")
    with pytest.raises(BusUnavailable) as caught:
        await f.attempt(job, SLOT)
    assert str(caught.value) == "the message bus did not accept the event; retrying"
    assert fires("message", "bus_unavailable") == before + 1
    [line] = [r.getMessage() for r in caplog.records if "publishing job" in r.getMessage()]
    assert line.startswith("publishing job j-away failed: ")
    assert line.removeprefix("publishing job j-away failed: ") not in ("", "NoneType")
    plan = f.plan(job, SLOT + timedelta(seconds=1))
    done = await f._execute(plan)
    assert (done.next_run, done.runs, done.last_error) == (
        SLOT,  # still due, for the same slot
        0,
        "the message bus did not accept the event; retrying",
    )
    assert f.retry_later


async def test_an_action_that_fails_is_the_runs_error(nc: NATS, tmp_path: Path) -> None:
    f = firing(nc, tmp_path)
    (tmp_path / "main").mkdir()
    (tmp_path / "main" / "big.txt").write_bytes(b"x" * 5000)  # over the 1000-byte cap
    job = Job(name="w", kind="watch_file", agent="main", path="big.txt", every_ms=60_000)
    before = fires("watch_file", "error")
    outcome, error = await f.attempt(job, SLOT)
    assert outcome is None and error
    assert fires("watch_file", "error") == before + 1
    job.next_run = SLOT
    done = await f._execute(f.plan(job, SLOT))
    assert (done.last_result, done.last_error, done.runs) == ("error", error, 1)


async def test_an_unexpected_error_while_firing_is_logged_and_firing_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in one batch must not end the loop: the service would stay up and ready while
    no job ever fires again (no process restart would bring it back)."""
    f = Firing(None, None, {}, batch=10, concurrency=1, grace_s=60, poll_s=0.01)  # type: ignore[arg-type]
    stop = asyncio.Event()
    ticks = 0

    async def tick() -> int:
        nonlocal ticks
        ticks += 1
        if ticks == 1:
            raise RuntimeError("a bug")
        stop.set()
        return 0

    async def delay() -> float:
        return 0.01

    f.tick = tick  # type: ignore[method-assign]
    f._delay = delay  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger=firing_module.__name__):
        await asyncio.wait_for(f.run(stop), 30)
    assert ticks == 2
    [record] = [r for r in caplog.records if r.name == firing_module.__name__]
    assert record.getMessage() == "firing due jobs failed unexpectedly, retrying"
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
