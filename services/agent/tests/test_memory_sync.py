"""What the agent sends to memory on its own (memory/sync.py), against the memory client's seam
(a recording stand-in for the gRPC client):

- the background turn sync yields to live turns: turns that finish in quick succession are sent
  together once none has finished for ``quiet_s``, one SyncSession per session and scope with
  its turns in order; a turn after a quiet moment is its own call; a turn goes to the scope of
  its run's standing;
- the memory files are read beneath the workspace: a symlinked MEMORY.md, a symlinked memory/,
  a symlink or FIFO inside it, a file too large: none is indexed, each is logged once, and a
  file indexed before is forgotten once it is refused."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard import beneath
from switchboard.trust import Standing
from switchboard.v1 import memory_pb2
from switchboard_agent.memory.sync import (
    MAX_FILE_BYTES,
    MAX_TURNS_PER_CALL,
    FinishedTurn,
    MemoryFiles,
    TurnSync,
)


class RecordingClient:
    """Stands in for the memory service's client: records what the sync sends."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, list[str]]] = []
        self.called = asyncio.Event()
        self.ingested: list[tuple[str, str, bytes]] = []
        self.forgotten: list[tuple[str, str]] = []

    async def sync_turns(
        self, agent: str, user: str, session_key: str, turns: list[memory_pb2.SessionTurn]
    ) -> None:
        self.calls.append((agent, user, session_key, [t.turn_id for t in turns]))
        self.called.set()

    async def ingest_file(self, agent: str, path: str, body: bytes) -> None:
        self.ingested.append((agent, path, body))

    async def forget_file(self, agent: str, path: str) -> None:
        self.forgotten.append((agent, path))

    async def wait_calls(self, n: int) -> None:
        async with asyncio.timeout(10):
            while len(self.calls) < n:
                self.called.clear()
                await self.called.wait()


def turn(key: str, run_id: str, standing: Standing = Standing.OWNER) -> FinishedTurn:
    return FinishedTurn("main", key, run_id, f"question {run_id}", f"answer {run_id}", 1, standing)


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


async def test_a_turn_goes_to_the_scope_of_its_runs_standing() -> None:
    client = RecordingClient()
    sync = turn_sync(client)
    try:
        sync.submit(turn("main:telegram:42", "o1", Standing.OWNER))
        sync.submit(turn("main:telegram:42", "p1", Standing.PERSONAL))  # the same session
        sync.submit(turn("main:telegram:group:G", "g1", Standing.GROUP))
        await client.wait_calls(3)
        assert sorted(client.calls) == [
            ("main", "", "main:telegram:42", ["o1"]),
            ("main", "dm:telegram:42", "main:telegram:42", ["p1"]),
            ("main", "group:telegram:G", "main:telegram:group:G", ["g1"]),
        ]
    finally:
        await sync.close()


# --- memory files, read beneath the workspace ------------------------------------------------


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both ways beneath.py opens beneath a directory: the kernel's and the fallback walk."""
    if request.param == "openat2" and not beneath.openat2_available():
        pytest.skip("openat2 is not available on this kernel")
    beneath.use_resolver(request.param)
    yield request.param
    beneath.use_resolver(None)


def files_of(client: RecordingClient, root: Path) -> MemoryFiles:
    as_client: Any = client
    return MemoryFiles(as_client, root)


def _created(path: Path) -> Path:
    path.touch()
    return path


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "not indexed" in r.getMessage()]


async def test_symlinks_fifos_and_huge_files_are_never_indexed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, resolver: str
) -> None:
    secret = tmp_path / "outside" / "nats.creds"
    secret.parent.mkdir()
    secret.write_text("SECRET credentials")
    (secret.parent / "stolen.md").write_text("SECRET in a folder outside")
    root = tmp_path / "workspaces"
    ws = root / "main"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").symlink_to(secret)
    (ws / "memory" / "notes.md").write_text("a fine note")
    (ws / "memory" / "link.md").symlink_to(secret)
    (ws / "memory" / "relative.md").symlink_to("notes.md")  # inside, but still a symlink
    os.mkfifo(ws / "memory" / "pipe.md")
    os.truncate(_created(ws / "memory" / "huge.md"), MAX_FILE_BYTES + 1)  # sparse
    # Another agent whose memory/ is a symlink to the folder outside.
    (root / "other").mkdir()
    (root / "other" / "memory").symlink_to(secret.parent)
    # A third whose workspace itself is a symlink.
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "MEMORY.md").write_text("SECRET behind a linked workspace")
    (root / "linked").symlink_to(tmp_path / "real")

    client = RecordingClient()
    files = files_of(client, root)
    caplog.set_level(logging.WARNING)
    for agent in ("main", "other", "linked"):
        await asyncio.wait_for(files.refresh(agent), 10)  # a FIFO never blocks it
    assert client.ingested == [("main", "memory/notes.md", b"a fine note")]
    assert not any(b"SECRET" in body for _, _, body in client.ingested)
    refused = refusals(caplog)
    for name in ("MEMORY.md", "memory/link.md", "memory/relative.md", "memory/pipe.md"):
        assert any(m.startswith(f"memory file not indexed: {name} is ") for m in refused), name
    assert any("memory/huge.md is larger than" in m for m in refused)
    assert "memory file not indexed: memory/ is a symlink" in refused
    assert any(m.startswith("memory file not indexed: . is") for m in refused)
    # Each refused file's name is forgotten, should an earlier process have indexed it.
    assert ("main", "MEMORY.md") in client.forgotten
    assert ("main", "memory/pipe.md") in client.forgotten

    # Logged once: the next refresh finds the same and says nothing new.
    caplog.clear()
    files._checked.clear()  # past FILES_EVERY_S
    await files.refresh("main")
    assert refusals(caplog) == []
    assert client.ingested == [("main", "memory/notes.md", b"a fine note")]


async def test_a_file_indexed_before_is_forgotten_once_it_is_a_symlink(
    tmp_path: Path, resolver: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    ws = tmp_path / "ws" / "main"
    ws.mkdir(parents=True)
    (ws / "MEMORY.md").write_text("the owner's notes")
    client = RecordingClient()
    files = files_of(client, tmp_path / "ws")
    await files.refresh("main")
    assert client.ingested == [("main", "MEMORY.md", b"the owner's notes")]
    # A sandboxed command swaps it for a symlink to a secret.
    (ws / "MEMORY.md").unlink()
    (ws / "MEMORY.md").symlink_to(secret)
    files._checked.clear()
    await files.refresh("main")
    assert client.forgotten == [("main", "MEMORY.md")]
    assert len(client.ingested) == 1
    # A regular file again: indexed again.
    (ws / "MEMORY.md").unlink()
    (ws / "MEMORY.md").write_text("new notes")
    files._checked.clear()
    await files.refresh("main")
    assert client.ingested[-1] == ("main", "MEMORY.md", b"new notes")
