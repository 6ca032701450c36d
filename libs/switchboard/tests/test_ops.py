"""Readiness: failures are logged once with the reason, recoveries once; the ops server."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from switchboard.ops import OpsServer, Readiness

OPS_LOGGER = "switchboard.ops"


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == OPS_LOGGER and r.levelno == level]


class Flaky:
    """A check whose outcome the test chooses: pass, say no, raise or hang."""

    def __init__(self) -> None:
        self.mode = "pass"
        self.calls = 0

    async def __call__(self) -> bool:
        self.calls += 1
        if self.mode == "raise":
            raise ConnectionRefusedError("connection refused by db:5432")
        if self.mode == "hang":
            await asyncio.Event().wait()
        return self.mode == "pass"


async def test_a_failing_check_warns_once_with_the_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=OPS_LOGGER)
    check = Flaky()
    readiness = Readiness()
    readiness.add("postgres", check)
    readiness.add("fine", Flaky())

    assert await readiness.evaluate() == {"postgres": True, "fine": True}
    assert _records(caplog, logging.WARNING) == []

    check.mode = "raise"
    for _ in range(5):
        assert await readiness.evaluate() == {"postgres": False, "fine": True}
    assert check.calls == 6
    warnings = _records(caplog, logging.WARNING)
    assert len(warnings) == 1, warnings
    assert "postgres" in warnings[0]
    assert "ConnectionRefusedError: connection refused by db:5432" in warnings[0]

    check.mode = "pass"
    for _ in range(3):
        assert await readiness.evaluate() == {"postgres": True, "fine": True}
    recoveries = _records(caplog, logging.INFO)
    assert len(recoveries) == 1, recoveries
    assert "postgres" in recoveries[0]
    assert len(_records(caplog, logging.WARNING)) == 1


async def test_a_hanging_check_warns_once_with_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=OPS_LOGGER)
    check = Flaky()
    check.mode = "hang"
    readiness = Readiness()
    readiness.add("nats", check)
    for _ in range(3):
        assert await readiness.evaluate(timeout=0.05) == {"nats": False}
    warnings = _records(caplog, logging.WARNING)
    assert len(warnings) == 1, warnings
    assert "nats" in warnings[0] and "no answer within 0.05s" in warnings[0]


async def test_a_check_saying_no_and_failing_again_after_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=OPS_LOGGER)
    check = Flaky()
    readiness = Readiness()
    readiness.add("started", check)
    check.mode = "no"
    await readiness.evaluate()
    await readiness.evaluate()
    check.mode = "pass"
    await readiness.evaluate()
    check.mode = "raise"
    await readiness.evaluate()
    await readiness.evaluate()
    warnings = _records(caplog, logging.WARNING)
    assert len(warnings) == 2, warnings  # one per episode of failure
    assert "the check said no" in warnings[0]
    assert "ConnectionRefusedError" in warnings[1]
    assert len(_records(caplog, logging.INFO)) == 1


async def test_ops_server_serves_probes_and_metrics() -> None:
    check = Flaky()
    readiness = Readiness()
    readiness.add("thing", check)
    server = OpsServer(readiness, "127.0.0.1", 0)
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            assert (await client.get("/healthz")).json() == {"status": "ok"}
            ready = await client.get("/readyz")
            assert ready.status_code == 200
            assert ready.json() == {"status": "ready", "checks": {"thing": True}}
            check.mode = "no"
            not_ready = await client.get("/readyz")
            assert not_ready.status_code == 503
            assert not_ready.json()["checks"] == {"thing": False}
            metrics = await client.get("/metrics")
            assert metrics.status_code == 200
            assert "python_info" in metrics.text
    finally:
        await server.stop()
