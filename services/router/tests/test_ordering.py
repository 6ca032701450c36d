"""A session's lane appends keep their order while one of them waits out a bus outage."""

from __future__ import annotations

import asyncio

import pytest
from nats.errors import TimeoutError as NatsTimeout

from switchboard_router import ordering
from switchboard_router.ordering import SessionTurns, retrying


async def test_a_later_message_waits_for_the_one_retrying_before_it() -> None:
    turns = SessionTurns()
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
