"""The Qdrant Edge store's flushing: writes are flushed together at most once per interval, and
a write that was never flushed is still there after its process is killed (the shard's
write-ahead log), which is what makes flushing per interval instead of per write safe."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from switchboard_memory.edge_store import EdgeStore
from switchboard_memory.entries import Entry, entry_id
from switchboard_memory.sparse import SparseVector

ROOT = Path(__file__).resolve().parents[3]  # the repository: the child imports this module
AGENT = "main"
DIMENSION = 4
CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from services.memory.tests.test_edge_store import AGENT, DIMENSION, entries
from switchboard_memory.edge_store import EdgeStore

async def main() -> None:
    store = EdgeStore(Path(sys.argv[1]), "mem", flush_every_s=3600)
    await store.upsert(AGENT, DIMENSION, entries(0, 5))  # creates the shard: nothing to lose
    await store.flush()
    await store.upsert(AGENT, DIMENSION, entries(5, 20))  # never flushed
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def entries(start: int, stop: int) -> list[Entry]:
    """Entries stored without a dense vector (``without_dense`` lists them back)."""
    return [
        Entry(
            id=entry_id(AGENT, "u1", "note", "", f"note {n}"),
            text=f"note {n}",
            source="note",
            user="u1",
            sparse=SparseVector([n + 1], [1.0]),
        )
        for n in range(start, stop)
    ]


class CountingShard:
    """A shard whose flushes are counted (the Rust object's methods cannot be patched)."""

    def __init__(self, shard: Any) -> None:
        self.shard = shard
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        self.shard.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.shard, name)


async def test_writes_are_flushed_together_within_the_interval(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, "mem", flush_every_s=0.3)
    try:
        await store.upsert(AGENT, DIMENSION, entries(0, 1))
        counting = CountingShard(store._shards[AGENT])
        store._shards[AGENT] = counting  # type: ignore[assignment]
        for n in range(1, 20):
            await store.upsert(AGENT, DIMENSION, entries(n, n + 1))
        assert counting.flushes == 0  # nothing flushed per write
        for _ in range(200):  # the interval is 0.3 s; allow a loaded machine 20 s
            if counting.flushes and not store._dirty:
                break
            await asyncio.sleep(0.1)
        assert counting.flushes == 1 and not store._dirty
        assert await store.delete(AGENT, "u1", [entries(0, 1)[0].id], None) == 1
        for _ in range(200):
            if counting.flushes == 2:
                break
            await asyncio.sleep(0.1)
        assert counting.flushes == 2  # a deletion is flushed too
    finally:
        await store.close()
    assert len(await reopened(tmp_path)) == 19


async def test_close_flushes_what_is_waiting(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, "mem", flush_every_s=3600)
    await store.upsert(AGENT, DIMENSION, entries(0, 7))
    await store.close()
    assert len(await reopened(tmp_path)) == 7


def test_a_killed_process_loses_no_acknowledged_write(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert len(asyncio.run(reopened(tmp_path))) == 20


async def reopened(root: Path) -> list[str]:
    store = EdgeStore(root, "mem")
    try:
        return sorted(hit.id for hit in await store.without_dense(AGENT, 100))
    finally:
        await store.close()
