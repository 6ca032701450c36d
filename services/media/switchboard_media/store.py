"""The content-addressed store: the bytes in ``<dir>/<sha[:2]>/<sha>`` (written to a temporary
file and renamed, so a reader never sees half a file), a row per file in ``media.files`` with
its sniffed type and expiry.

Replicas share the directory and the table. A file's row is locked while its file is written
(ingest) or deleted (cleanup), so an ingest of content that is being cleaned up waits for the
cleanup and then writes the file again; cleanup takes expired rows with ``SKIP LOCKED``, so
replicas never wait for each other. Files without a row (a crash between the two) and stale
temporary files are swept once they are older than an hour."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from .errors import NotFound

log = logging.getLogger(__name__)
CHUNK = 256 * 1024
ORPHAN_AGE_S = 3600.0
_COLUMNS = "sha256, mime, size, width, height, expires_at"


@dataclass(frozen=True)
class Stored:
    sha256: str
    mime: str
    size: int
    width: int
    height: int
    expires_at_ms: int


def _stored(row: asyncpg.Record) -> Stored:
    return Stored(
        row["sha256"],
        row["mime"],
        row["size"],
        row["width"],
        row["height"],
        int(row["expires_at"].timestamp() * 1000),
    )


def check_sha(sha256: str) -> str:
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise NotFound("sha256 must be 64 lower-case hex digits of a stored file")
    return sha256


class MediaStore:
    def __init__(self, pool: asyncpg.Pool, root: Path, ttl_s: int) -> None:
        self.pool = pool
        self.root = root
        self.ttl_s = ttl_s

    def open(self) -> None:
        """The directory, private to the service (0700)."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.root.chmod(0o700)

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    async def put(self, data: bytes, mime: str, width: int, height: int, ttl_s: int = 0) -> Stored:
        """Store ``data`` (checked by the caller); the same content again is the same file,
        its expiry moved forward."""
        sha = hashlib.sha256(data).hexdigest()
        ttl = min(ttl_s, self.ttl_s) if ttl_s > 0 else self.ttl_s
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                f"""
                INSERT INTO media.files (sha256, mime, size, width, height, expires_at)
                VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))
                ON CONFLICT (sha256) DO UPDATE
                    SET expires_at = GREATEST(media.files.expires_at, EXCLUDED.expires_at)
                RETURNING {_COLUMNS}
                """,
                sha,
                mime,
                len(data),
                width,
                height,
                float(ttl),
            )
            await asyncio.to_thread(self._write, sha, data)
        return _stored(row)

    def _write(self, sha: str, data: bytes) -> None:
        path = self.path(sha)
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_size == len(data):
                return  # the same content is there
        path.parent.mkdir(mode=0o700, exist_ok=True)
        temp = path.parent / f".tmp-{sha[:16]}-{uuid.uuid4().hex}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    async def find(self, sha256: str) -> Stored:
        """The stored file; :class:`NotFound` if unknown, expired or its bytes are gone."""
        row = await self.pool.fetchrow(
            f"SELECT {_COLUMNS} FROM media.files WHERE sha256 = $1 AND expires_at > now()",
            check_sha(sha256),
        )
        if row is None or not self.path(sha256).is_file():
            raise NotFound(f"no stored file {sha256[:12]}... (unknown, or it expired)")
        return _stored(row)

    async def read(self, stored: Stored) -> bytes:
        try:
            return await asyncio.to_thread(self.path(stored.sha256).read_bytes)
        except FileNotFoundError as exc:
            raise NotFound(f"the file {stored.sha256[:12]}... expired") from exc

    async def chunks(self, stored: Stored) -> AsyncIterator[bytes]:
        try:
            handle = await asyncio.to_thread(self.path(stored.sha256).open, "rb")
        except FileNotFoundError as exc:
            raise NotFound(f"the file {stored.sha256[:12]}... expired") from exc
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK):
                yield chunk
        finally:
            handle.close()

    async def expire(self, batch: int = 500) -> int:
        """Delete expired rows and their files (a batch; the loop calls again); how many."""
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                """
                DELETE FROM media.files WHERE sha256 IN (
                    SELECT sha256 FROM media.files WHERE expires_at <= now()
                    ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
                RETURNING sha256
                """,
                batch,
            )
            for row in rows:  # while the rows are locked: an ingest of them waits
                await asyncio.to_thread(self.path(row["sha256"]).unlink, missing_ok=True)
        return len(rows)

    async def sweep(self) -> int:
        """Remove files without a row and temporary files, older than an hour."""
        known = {r["sha256"] for r in await self.pool.fetch("SELECT sha256 FROM media.files")}
        return await asyncio.to_thread(self._sweep, known, time.time() - ORPHAN_AGE_S)

    def _sweep(self, known: set[str], before: float) -> int:
        removed = 0
        for path in self.root.glob("*/*"):
            with contextlib.suppress(FileNotFoundError):
                if path.name not in known and path.stat().st_mtime < before:
                    path.unlink()
                    removed += 1
        return removed
