"""The A2A task store forgets its oldest tasks beyond its bound (a long-lived gateway)."""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import Task

from switchboard_gateway.a2a_store import BoundedTaskStore


async def test_the_oldest_tasks_are_forgotten_beyond_the_bound() -> None:
    store, ctx = BoundedTaskStore(max_tasks=2), ServerCallContext()
    for task_id in ("a", "b", "a", "c"):  # saving "a" again does not make it newer
        await store.save(Task(id=task_id, context_id="x"), ctx)
    assert [await store.get(t, ctx) is not None for t in ("a", "b", "c")] == [False, True, True]
    await store.delete("b", ctx)
    await store.save(Task(id="d", context_id="x"), ctx)
    assert [await store.get(t, ctx) is not None for t in ("c", "d")] == [True, True]
