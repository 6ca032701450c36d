"""switchboard.retry: a publish that fails for a moment is tried again, with the caller's pauses
and deadline, and anything else fails at once. The attempt is a plain callable that fails a
set number of times (the helper's input, not a stand-in for a service)."""

from __future__ import annotations

import asyncio

import pytest
from nats.errors import ConnectionClosedError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

from switchboard import retry
from switchboard.retry import TRANSIENT, TRANSIENT_OR_CLOSED, retrying


class Flaky:
    """Raises ``error()`` on the first ``failures`` calls, then returns 42."""

    def __init__(self, error: type[Exception], failures: int) -> None:
        self.error, self.failures, self.calls = error, failures, 0

    async def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error()
        return 42


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses the helper takes, taken as no time at all (a deadline is then the only limit
    on real time; the tests that need one use real pauses)."""
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(retry.asyncio, "sleep", sleep)
    return pauses


@pytest.mark.parametrize(
    "error",
    [NatsTimeout, NoRespondersError, NoStreamResponseError, ServiceUnavailableError, TimeoutError],
    ids=lambda error: f"{error.__module__}.{error.__name__}",
)
async def test_each_transient_error_is_tried_again_until_it_works(
    error: type[Exception], slept: list[float]
) -> None:
    attempt = Flaky(error, failures=3)
    assert await retrying(attempt, within_s=60, first_delay_s=0.25) == 42
    assert attempt.calls == 4
    assert slept == [0.25, 0.5, 1.0]


async def test_the_pause_doubles_up_to_the_cap(slept: list[float]) -> None:
    attempt = Flaky(NoStreamResponseError, failures=6)
    assert await retrying(attempt, within_s=60, first_delay_s=0.1, max_delay_s=0.5) == 42
    assert slept == [0.1, 0.2, 0.4, 0.5, 0.5, 0.5]


async def test_a_closed_connection_is_final_unless_the_caller_waits_for_reconnects(
    slept: list[float],
) -> None:
    closed = Flaky(ConnectionClosedError, failures=2)
    with pytest.raises(ConnectionClosedError):
        await retrying(closed, within_s=60, first_delay_s=0.1)
    assert closed.calls == 1 and slept == []

    closed = Flaky(ConnectionClosedError, failures=2)
    assert await retrying(closed, within_s=60, first_delay_s=0.1, transient=TRANSIENT_OR_CLOSED)
    assert closed.calls == 3
    assert ConnectionClosedError not in TRANSIENT


@pytest.mark.parametrize("error", [ValueError, NoStreamResponseError])
async def test_an_error_outside_the_callers_set_is_raised_at_once(
    error: type[Exception], slept: list[float]
) -> None:
    attempt = Flaky(error, failures=1)
    with pytest.raises(error):
        await retrying(attempt, within_s=60, first_delay_s=0.1, transient=(TimeoutError,))
    assert attempt.calls == 1 and slept == []


async def test_past_the_deadline_the_last_error_is_raised_as_it_was() -> None:
    """Real pauses against a 0.5 s window: it tries again, then gives up with the error itself
    (the outer bound is only there so that a loop without a deadline fails instead of hanging)."""
    attempt = Flaky(NoRespondersError, failures=10_000)
    with pytest.raises(NoRespondersError):
        await asyncio.wait_for(retrying(attempt, within_s=0.5, first_delay_s=0.1), 60)
    assert attempt.calls >= 2


async def test_a_zero_window_tries_once() -> None:
    attempt = Flaky(TimeoutError, failures=1)
    with pytest.raises(TimeoutError):
        await retrying(attempt, within_s=0, first_delay_s=0.25)
    assert attempt.calls == 1


async def test_without_a_deadline_it_keeps_trying(slept: list[float]) -> None:
    attempt = Flaky(ServiceUnavailableError, failures=40)
    assert await retrying(attempt, within_s=None, first_delay_s=0.25) == 42
    assert attempt.calls == 41
    assert slept[-1] == 2.0 and len(slept) == 40


async def test_on_retry_sees_each_error_tried_again_but_not_the_last(slept: list[float]) -> None:
    """The gateway notes a timed-out attempt (it may have been stored); the router logs."""
    errors: list[type[Exception]] = [NatsTimeout, NoStreamResponseError, TimeoutError]
    seen: list[Exception] = []

    async def attempt() -> str:
        if errors:
            raise errors.pop(0)()
        return "ok"

    assert await retrying(attempt, within_s=60, first_delay_s=0.1, on_retry=seen.append) == "ok"
    assert [type(e) for e in seen] == [NatsTimeout, NoStreamResponseError, TimeoutError]

    seen.clear()
    with pytest.raises(NoRespondersError):
        await retrying(
            Flaky(NoRespondersError, 5), within_s=0, first_delay_s=0.1, on_retry=seen.append
        )
    assert seen == []
