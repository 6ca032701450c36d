"""Migrations against a real PostgreSQL."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from switchboard.errors import ConfigError
from switchboard.store import Migration, create_pool, migrate

MIGRATIONS = [
    Migration(1, "things", "CREATE TABLE demo.things (id int PRIMARY KEY)"),
    Migration(2, "name", "ALTER TABLE demo.things ADD COLUMN name text"),
]


async def test_migrations_apply_in_order_once(database_url: str) -> None:
    pool = await create_pool(database_url)
    try:
        assert await migrate(pool, "demo", MIGRATIONS[:1]) == [1]
        assert await migrate(pool, "demo", MIGRATIONS) == [2]
        assert await migrate(pool, "demo", MIGRATIONS) == []
        await pool.execute("INSERT INTO demo.things (id, name) VALUES (1, 'x')")
        rows = await pool.fetch("SELECT version, name FROM demo.schema_migrations ORDER BY 1")
        assert [(r["version"], r["name"]) for r in rows] == [(1, "things"), (2, "name")]
    finally:
        await pool.close()


async def test_concurrent_replicas_migrate_once(database_url: str) -> None:
    pools = [await create_pool(database_url) for _ in range(3)]
    try:
        results = await asyncio.gather(*(migrate(p, "demo", MIGRATIONS) for p in pools))
        assert sorted(v for r in results for v in r) == [1, 2]
    finally:
        for p in pools:
            await p.close()


async def test_failed_migration_rolls_back(database_url: str) -> None:
    pool = await create_pool(database_url)
    try:
        bad = [*MIGRATIONS, Migration(3, "broken", "ALTER TABLE demo.nope ADD COLUMN x int")]
        with pytest.raises(asyncpg.UndefinedTableError):
            await migrate(pool, "demo", bad)
        assert await pool.fetchval("SELECT to_regclass('demo.schema_migrations')") is None
        assert await migrate(pool, "demo", MIGRATIONS) == [1, 2]
    finally:
        await pool.close()


async def test_bad_migration_lists_are_refused(database_url: str) -> None:
    pool = await create_pool(database_url)
    try:
        with pytest.raises(ConfigError):
            await migrate(pool, "Bad-Schema", MIGRATIONS)
        with pytest.raises(ConfigError):
            await migrate(pool, "demo", list(reversed(MIGRATIONS)))
    finally:
        await pool.close()
