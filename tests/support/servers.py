"""pytest plugin: real servers for tests (DESIGN §13), via ``switchboard.embedded``.

Fixtures:
    nats_server   a fresh nats-server with JetStream per test (free port, temp store)
    nats_url      its URL
    postgres_uri  one PostgreSQL per session: SB_TEST_DATABASE_URL, else pgserver in a temp dir
    database_url  a fresh database in that server per test, dropped afterwards

testcontainers (SB_TEST_CONTAINERS=1 with a Docker engine) is not wired in: the package is not a
dependency. To add it, start ``NatsContainer``/``PostgresContainer`` in ``nats_server`` and
``postgres_uri`` when that variable is set and ``docker.from_env().ping()`` succeeds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import tempfile
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from switchboard.embedded import NatsServer, Postgres, create_database, drop_database

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even when an event loop is running."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path / "nats").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url


@pytest.fixture(scope="session")
def postgres_uri() -> Iterator[str]:
    external = os.environ.get("SB_TEST_DATABASE_URL")
    if external:
        yield external
        return
    # Not under pytest's tmp tree: pgserver runs postgres as another user when we are root and
    # opens up the parent dirs, which pytest tightens again for concurrent sessions.
    root = Path(tempfile.mkdtemp(prefix="sb-test-pg-"))
    server = Postgres(root / "pgdata")
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def database_url(postgres_uri: str) -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex[:16]}"
    url = run_sync(create_database(postgres_uri, name))
    try:
        yield url
    finally:
        run_sync(drop_database(postgres_uri, name))
