"""The agent's session store on a real PostgreSQL (the test's database, migrated), and a usage
store that counts its own statements; for the store, usage and commit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchboard.store import create_pool, migrate
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.sessions.store import SessionStore
from switchboard_agent.usage.store import UsageStore


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[SessionStore]:
    pool = await create_pool(database_url, max_size=4)
    await migrate(pool, SCHEMA, MIGRATIONS)
    try:
        yield SessionStore(pool)
    finally:
        await pool.close()


class CountingStore(UsageStore):
    """The real store, counting the statements of its own (not those of a run's commit)."""

    def __init__(self, pool: Any) -> None:
        super().__init__(pool)
        self.statements: list[int] = []

    async def add_many(self, calls: Any) -> None:
        self.statements.append(len(calls))
        await super().add_many(calls)
