"""A session's lane appends keep their order while one of them waits out a bus outage, and
after one gave up: its session's later messages wait for its redelivery."""

from __future__ import annotations

import asyncio

import pytest
from nats.errors import TimeoutError as NatsTimeout

from switchboard_router import ordering
from switchboard_router.ordering import SessionGate, SessionTurns, in_order, retrying


async def test_a_later_message_waits_for_the_one_retrying_before_it() -> None:
    turns = SessionTurns(SessionGate())
    appended: list[str] = []
    outage = asyncio.Event()
    failures = 3

    async def append(text: str) -> int:
        nonlocal failures
        if text == "#1" and failures:
            failures -= 1
            outage.set()
            raise NatsTimeout
        appended.append(text)
        return len(appended)

    async def route(text: str, session: str = "s") -> None:
        async with turns.turn(session):
            await retrying(lambda: append(text), "append")

    first = asyncio.create_task(route("#1"))
    await outage.wait()  # #1 failed once and is retrying, holding its session's turn
    await asyncio.gather(route("#2"), route("other", session="t"), first)
    assert appended.index("#1") < appended.index("#2")
    assert turns._locks == {}  # nothing kept once every append is done


async def test_it_gives_up_after_the_retry_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ordering, "RETRY_FOR_S", 0.3)

    async def down() -> int:
        raise NatsTimeout

    with pytest.raises(NatsTimeout):
        await retrying(down, "append")


class Lane:
    """The router's path for one delivery, as pipeline.Router.handle composes it: ``in_order``
    around the turn and the retried append (``append`` scripted: it fails while ``down``)."""

    def __init__(self) -> None:
        self.gate = SessionGate()
        self.turns = SessionTurns(self.gate)
        self.appended: list[str] = []
        self.down = True
        self.failing = asyncio.Event()  # an append failed at least once
        self.held: list[str] = []

    async def append(self, text: str) -> int:
        if self.down and text == "#1":
            self.failing.set()
            raise NatsTimeout
        self.appended.append(text)
        return len(self.appended)

    async def deliver(self, text: str, session: str = "s") -> None:
        async def work() -> None:
            async with self.turns.turn(session, text):
                await retrying(lambda: self.append(text), "append")

        await in_order(self.gate, session, text, work, lambda: self.held.append(text))


async def test_the_messages_behind_one_that_gave_up_wait_for_its_redelivery(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#1's append gives up (the outage outlasted the retry window) while #2 and #3 wait for
    the session's turn; #4 arrives after. Before, #2 took the turn as soon as #1 let go and
    was appended first: a Slack message of the fault campaign was answered after three later
    ones. Now #2-#4 queue until #1's redelivery is appended, then go in their order."""
    monkeypatch.setattr(ordering, "RETRY_FOR_S", 0.3)
    lane = Lane()
    first = asyncio.create_task(lane.deliver("#1"))
    await lane.failing.wait()
    waiting = [asyncio.create_task(lane.deliver(t)) for t in ("#2", "#3")]
    other = asyncio.create_task(lane.deliver("x", session="t"))  # another session goes on
    with pytest.raises(NatsTimeout):
        await first  # the consumer NAKs it: it comes back after a delay
    later = asyncio.create_task(lane.deliver("#4"))
    await asyncio.wait_for(other, 10)
    for _ in range(20):  # let every waiting task run: none may append before #1
        await asyncio.sleep(0.01)
    assert lane.appended == ["x"]
    assert set(lane.held) == {"#2", "#3", "#4"}
    lane.down = False
    await lane.deliver("#1")  # the redelivery
    await asyncio.wait_for(asyncio.gather(*waiting, later), 10)
    assert lane.appended == ["x", "#1", "#2", "#3", "#4"]
    assert lane.gate._holds == {} and lane.turns._locks == {}


async def test_a_session_is_not_held_forever_by_a_message_that_never_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The failed message's redelivery may go to another router replica: after HOLD_S
    without news of it, the session's messages go on (in their order)."""
    monkeypatch.setattr(ordering, "RETRY_FOR_S", 0.1)
    monkeypatch.setattr(ordering, "HOLD_S", 0.5)
    lane = Lane()
    with pytest.raises(NatsTimeout):
        await lane.deliver("#1")
    await asyncio.wait_for(asyncio.gather(lane.deliver("#2"), lane.deliver("#3")), 10)
    assert lane.appended == ["#2", "#3"] and lane.held == ["#2", "#3"]
    assert lane.gate._holds == {}
