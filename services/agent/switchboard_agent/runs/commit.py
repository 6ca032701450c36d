"""A run's commit with the usage rows of its model calls (usage/writer.py): one statement for
the transcript, the run row, the cursor and the usage, where the usage cost a round trip of its
own per model call before."""

from __future__ import annotations

from ..sessions.store import CursorMoved, RunRecord, SessionStore
from .budget import Accounting


def holds_usage(accounting: Accounting | None) -> bool:
    """Whether runs may keep their usage rows for their commit: only while no budget limit
    reads stored usage (session or agent-day limits sum ``agent.usage`` before each call, on
    every replica, so there each call's row is written at once)."""
    if accounting is None:
        return False
    budget = accounting.budget
    if budget is None:
        return True
    return not budget.needs_database and not any(a.needs_database for a in budget.agents.values())


def hold_usage(accounting: Accounting | None, run_id: str) -> None:
    """Start holding the run's usage rows for its commit, where that is allowed."""
    if accounting is not None and holds_usage(accounting):
        accounting.writer.hold(run_id)


async def commit_run(
    store: SessionStore, accounting: Accounting | None, record: RunRecord, expected_cursor: int
) -> None:
    """``store.commit_run`` with the run's held usage rows. Rows the statement did not write
    (it failed) go to the writer; on :class:`CursorMoved` they were written (the calls were
    made either way) and the run is still not committed."""
    if accounting is None:
        await store.commit_run(record, expected_cursor)
        return
    writer = accounting.writer
    held = writer.take(record.run_id)
    try:
        await store.commit_run(record, expected_cursor, held.rows)
    except CursorMoved:
        writer.written(held)
        raise
    except BaseException:
        writer.requeue(held)
        raise
    writer.written(held)
