"""PostgreSQL: an asyncpg pool and ordered, idempotent migrations, one schema per service."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from .errors import ConfigError, DependencyUnavailable

log = logging.getLogger(__name__)

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


async def create_pool(dsn: str, *, max_size: int = 10, wait_s: float = 60.0) -> asyncpg.Pool:
    """Open a pool, retrying while the server starts (embedded mode starts it in parallel)."""
    deadline = time.monotonic() + wait_s
    delay = 0.1
    while True:
        try:
            return await asyncpg.create_pool(
                dsn, min_size=1, max_size=max_size, timeout=5.0, reset=_keep_session
            )
        except (OSError, asyncpg.CannotConnectNowError, asyncpg.PostgresConnectionError) as exc:
            if time.monotonic() > deadline:
                raise DependencyUnavailable(f"PostgreSQL did not answer: {exc}") from exc
            log.info("waiting for PostgreSQL (%s)", type(exc).__name__)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool release without the reset query (a round trip per query: about a third of the
    agent's PostgreSQL traffic). asyncpg still rolls back a transaction left open and drops
    listeners; the services keep no other session state (no SET, LISTEN, session advisory
    locks or cursors: migrations take a transaction-scoped lock)."""


async def migrate(pool: asyncpg.Pool, schema: str, migrations: Sequence[Migration]) -> list[int]:
    """Apply the migrations ``schema`` has not recorded yet, in version order; return them.

    A transaction-scoped advisory lock serializes replicas starting at the same time.
    """
    if not _SCHEMA.match(schema):
        raise ConfigError(f"invalid schema name {schema!r}")
    versions = [m.version for m in migrations]
    if versions != sorted(set(versions)):
        raise ConfigError(f"migrations of {schema} must have unique, increasing versions")
    applied: list[int] = []
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"sb-migrate-{schema}")
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {schema}.schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {
            r["version"]
            for r in await conn.fetch(f"SELECT version FROM {schema}.schema_migrations")
        }
        for m in migrations:
            if m.version in done:
                continue
            await conn.execute(m.sql)
            await conn.execute(
                f"INSERT INTO {schema}.schema_migrations (version, name) VALUES ($1, $2)",
                m.version,
                m.name,
            )
            applied.append(m.version)
    if applied:
        log.info("applied migrations", extra={"schema": schema, "versions": applied})
    return applied
