"""The jobs table: add, read, change, remove; claiming due jobs is :mod:`.firing`'s."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from .errors import JobExists, JobNotFound
from .jobs import COLUMNS, Job

_SELECT = f"SELECT {', '.join(COLUMNS)} FROM scheduler.jobs"
_WRITABLE = [c for c in COLUMNS if c != "created_at"]


class JobStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def add(self, job: Job) -> Job:
        row = job.row()
        names = ", ".join(_WRITABLE)
        values = ", ".join(f"${n}" for n in range(1, len(_WRITABLE) + 1))
        try:
            stored = await self.pool.fetchrow(
                f"INSERT INTO scheduler.jobs ({names}) VALUES ({values}) "
                f"RETURNING {', '.join(COLUMNS)}",
                *[row[c] for c in _WRITABLE],
            )
        except asyncpg.UniqueViolationError as exc:
            raise JobExists(f"a job named {job.name!r} exists already") from exc
        assert stored is not None
        return Job.from_row(stored)

    async def get(
        self, name: str, conn: asyncpg.Connection | None = None, lock: bool = False
    ) -> Job:
        query = f"{_SELECT} WHERE name = $1" + (" FOR UPDATE" if lock else "")
        row = await (conn or self.pool).fetchrow(query, name)
        if row is None:
            raise JobNotFound(f"no job named {name!r}")
        return Job.from_row(row)

    async def list(self, agent: str = "", session_key: str = "") -> list[Job]:
        rows = await self.pool.fetch(
            f"{_SELECT} WHERE ($1 = '' OR agent = $1) AND ($2 = '' OR session_key = $2) "
            "ORDER BY name",
            agent,
            session_key,
        )
        return [Job.from_row(r) for r in rows]

    async def save(self, job: Job, conn: asyncpg.Connection | None = None) -> Job:
        """Write every field of ``job`` (found by name)."""
        row = job.row()
        fields = [c for c in _WRITABLE if c != "name"]
        sets = ", ".join(f"{c} = ${n}" for n, c in enumerate(fields, 2))
        stored = await (conn or self.pool).fetchrow(
            f"UPDATE scheduler.jobs SET {sets}, updated_at = now() WHERE name = $1 "
            f"RETURNING {', '.join(COLUMNS)}",
            job.name,
            *[row[c] for c in fields],
        )
        if stored is None:
            raise JobNotFound(f"no job named {job.name!r}")
        return Job.from_row(stored)

    async def remove(self, name: str) -> Job:
        row = await self.pool.fetchrow(
            f"DELETE FROM scheduler.jobs WHERE name = $1 RETURNING {', '.join(COLUMNS)}", name
        )
        if row is None:
            raise JobNotFound(f"no job named {name!r}")
        return Job.from_row(row)

    async def next_due(self) -> datetime | None:
        value: datetime | None = await self.pool.fetchval(
            "SELECT min(next_run) FROM scheduler.jobs WHERE enabled"
        )
        return value
