"""The background turn sync (memory_sync.TurnSync) yields to live turns: turns that finish in
quick succession are sent together once none has finished for ``quiet_s``, one SyncSession
per session with its turns in order; a turn after a quiet moment is its own call."""

from __future__ import annotations

import asyncio
from typing import Any

from switchboard.v1 import memory_pb2
from switchboard_agent.memory_sync import MAX_TURNS_PER_CALL, FinishedTurn, TurnSync


class RecordingClient:
    """Stands in for the memory service's client: records what the sync sends."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, list[str]]] = []
        self.called = asyncio.Event()

    async def sync_turns(
        self, agent: str, user: str, session_key: str, turns: list[memory_pb2.SessionTurn]
    ) -> None:
        self.calls.append((agent, user, session_key, [t.turn_id for t in turns]))
        self.called.set()

    async def wait_calls(self, n: int) -> None:
        async with asyncio.timeout(10):
            while len(self.calls) < n:
                self.called.clear()
                await self.called.wait()


def turn(key: str, run_id: str) -> FinishedTurn:
    return FinishedTurn("main", key, run_id, f"question {run_id}", f"answer {run_id}", 1)


def turn_sync(client: RecordingClient) -> TurnSync:
    as_client: Any = client
    sync = TurnSync(as_client, "agent", quiet_s=0.2)
    sync.start()
    return sync


async def test_a_burst_is_sent_per_session_after_a_quiet_moment() -> None:
    client = RecordingClient()
    sync = turn_sync(client)
    try:
        for run_id in ("a1", "b1", "a2", "a3", "b2"):
            sync.submit(turn("main:webchat:a" if run_id[0] == "a" else "main:webchat:b", run_id))
            await asyncio.sleep(0.01)  # well within the quiet time: one burst
        await client.wait_calls(2)
        assert sorted(client.calls) == [
            ("main", "", "main:webchat:a", ["a1", "a2", "a3"]),
            ("main", "", "main:webchat:b", ["b1", "b2"]),
        ]
        sync.submit(turn("main:webchat:a", "a4"))  # after the quiet moment: a call of its own
        await client.wait_calls(3)
        assert client.calls[2] == ("main", "", "main:webchat:a", ["a4"])
    finally:
        await sync.close()


async def test_a_long_burst_is_split_into_calls_the_service_accepts() -> None:
    client = RecordingClient()
    sync = turn_sync(client)
    try:
        for n in range(MAX_TURNS_PER_CALL + 5):
            sync.submit(turn("main:webchat:a", f"t{n}"))
        await client.wait_calls(2)
        assert [len(c[3]) for c in client.calls] == [MAX_TURNS_PER_CALL, 5]
        assert [t for c in client.calls for t in c[3]] == [
            f"t{n}" for n in range(MAX_TURNS_PER_CALL + 5)
        ]
    finally:
        await sync.close()
