"""pytest plugin: real servers for tests (docs/development.md), via ``switchboard.embedded``.

Fixtures:
    nats_server   a fresh nats-server with JetStream per test (free port, temp store)
    nats_url      its URL, with the admin's credentials (services: service_nats_env)
    postgres_uri  one PostgreSQL per session: SB_TEST_DATABASE_URL, else pgserver in a temp dir
    database_url  a fresh database in that server per test, dropped afterwards
    module_nats_url, module_database_url
                  the same, one per test module: for a system the module's tests share

With SB_TEST_CONTAINERS=1 and a Docker engine that answers, ``nats_url`` and ``postgres_uri``
come from containers (testcontainers) instead of the wheels; ``nats_server`` stays embedded,
since the tests that use it restart the server process themselves.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import secrets
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

import pytest

from switchboard import natsauth
from switchboard.embedded import NatsServer, Postgres, create_database, drop_database

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even when an event loop is running."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def service_nats_env(nats_url: str, service: str) -> dict[str, str]:
    """How ``service`` connects as its own NATS user to the server of ``nats_url`` (the admin
    URL of :func:`nats_server`; a URL without credentials is used as it is)."""
    parts = urlsplit(nats_url)
    if not parts.password:
        return {"SB_NATS_URL": nats_url}
    plain = urlunsplit(parts._replace(netloc=f"{parts.hostname}:{parts.port}"))
    credentials = natsauth.Credentials.derive(unquote(parts.password))
    return {"SB_NATS_URL": plain, **credentials.service_env(service)}


@contextlib.contextmanager
def embedded_nats(store: Path) -> Iterator[NatsServer]:
    """With a NATS user per service (switchboard.natsauth); ``admin_url`` connects as admin."""
    credentials = natsauth.Credentials.derive("p" + secrets.token_hex(18))
    server = NatsServer(store, credentials=credentials).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """With a NATS user per service (switchboard.natsauth); ``admin_url`` connects as admin."""
    with embedded_nats(tmp_path / "nats") as server:
        yield server


def containers_wanted() -> bool:
    """SB_TEST_CONTAINERS=1 and a Docker engine that answers a ping."""
    if os.environ.get("SB_TEST_CONTAINERS") != "1":
        return False
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:
        message = f"SB_TEST_CONTAINERS=1 but no Docker engine answers ({exc}); using wheels"
        warnings.warn(message, stacklevel=2)
        return False
    return True


@contextlib.contextmanager
def nats_container() -> Iterator[str]:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    with DockerContainer("nats:2.12-alpine").with_command("-js").with_exposed_ports(4222) as c:
        wait_for_logs(c, "Server is ready")
        yield f"nats://{c.get_container_host_ip()}:{c.get_exposed_port(4222)}"


@pytest.fixture
def nats_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if not containers_wanted():
        yield request.getfixturevalue("nats_server").admin_url
        return
    with nats_container() as url:
        yield url


@pytest.fixture(scope="module")
def module_nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A NATS server (as ``nats_url``) for the whole test module."""
    if containers_wanted():
        with nats_container() as url:
            yield url
        return
    with embedded_nats(tmp_path_factory.mktemp("nats")) as server:
        yield server.admin_url


@pytest.fixture(scope="session")
def postgres_uri() -> Iterator[str]:
    external = os.environ.get("SB_TEST_DATABASE_URL")
    if external:
        yield external
        return
    if containers_wanted():
        from testcontainers.community.postgres import PostgresContainer

        with PostgresContainer("postgres:16", driver=None) as pg:
            yield pg.get_connection_url()
        return
    # Not under pytest's tmp tree: pgserver runs postgres as another user when we are root and
    # opens up the parent dirs, which pytest tightens again for concurrent sessions.
    root = Path(tempfile.mkdtemp(prefix="sb-test-pg-"))
    server = Postgres(root / "pgdata")
    try:
        uri = server.start()
        run_sync(without_durability(uri))
        yield uri
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def without_durability(uri: str) -> None:
    """The tests' own throwaway server stops waiting for the disk: no fsync, commits that do
    not wait for their WAL flush, no full-page writes. Only a crash of the machine (or of this
    PostgreSQL, which no test kills: test_restart runs one of its own) could lose data."""
    import asyncpg

    conn = await asyncpg.connect(uri)
    try:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            await conn.execute(f"ALTER SYSTEM SET {setting} = off")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


@contextlib.contextmanager
def fresh_database(postgres_uri: str) -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex[:16]}"
    url = run_sync(create_database(postgres_uri, name))
    try:
        yield url
    finally:
        run_sync(drop_database(postgres_uri, name))


@pytest.fixture
def database_url(postgres_uri: str) -> Iterator[str]:
    with fresh_database(postgres_uri) as url:
        yield url


@pytest.fixture(scope="module")
def module_database_url(postgres_uri: str) -> Iterator[str]:
    """A fresh database (as ``database_url``) for the whole test module."""
    with fresh_database(postgres_uri) as url:
        yield url
