"""PostgreSQL on this machine for ``switchboard up`` (embedded mode) and the test fixtures: the
server shipped by the ``pgserver`` wheel, one per data dir, plus creating and dropping databases
on it. Kept apart from the NATS server (switchboard.embedded, which re-exports these names) so
each module stays readable; what both use is in switchboard.serverproc."""

from __future__ import annotations

import atexit
import contextlib
import logging
import subprocess
import time
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote, urlsplit, urlunsplit

import psutil

from .errors import causes
from .serverproc import ServerError, log_tail, wait_gone

__all__ = [
    "LATE_START_S",
    "Postgres",
    "create_database",
    "database_uri",
    "drop_database",
]


def _pgserver() -> Any:
    """Import pgserver lazily (it warns about XDG_RUNTIME_DIR on import in containers)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver
            import pgserver.postgres_server
    except ImportError as exc:
        raise ServerError(
            f"pgserver is not installed ({exc}); install it with `pip install pgserver` "
            "or point SB_DATABASE_URL at a PostgreSQL server"
        ) from exc

    # Its failures reach us as exceptions (with the server log); keep its logger off stderr.
    logging.getLogger("pgserver").addHandler(logging.NullHandler())
    return pgserver


# Seconds a PostgreSQL start is waited for beyond pgserver's own 10 s (Postgres._adopt_late_start).
LATE_START_S = 50.0


class Postgres:
    """A PostgreSQL server for one data dir, started by pgserver and listening on a unix socket.

    pgserver keeps a list of "handle" pids per data dir and only stops the server when the last
    handle closes; :meth:`stop` makes the outcome certain: afterwards no process of this server
    is left, whatever the list said.
    """

    def __init__(self, pgdata: Path | str) -> None:
        self.pgdata = Path(pgdata).expanduser().resolve()
        self._server: Any = None
        self._uri: str | None = None

    @property
    def uri(self) -> str:
        if self._uri is None:
            raise ServerError("Postgres is not started: call start() first")
        return self._uri

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while running."""
        info = _pgserver().postgres_server.PostmasterInfo.read_from_pgdata(self.pgdata)
        if info is None or not info.is_running():
            return None
        return int(info.pid)

    @property
    def log_file(self) -> Path:
        return self.pgdata / "log"

    def expected_uri(self) -> str:
        """The URI :meth:`start` will return, known before the server is up.

        pgserver puts the socket in the data dir when the path is short enough, else under its
        runtime dir; this asks pgserver's own function, so services can be launched in parallel.
        """
        pg = _pgserver()
        info = pg.postgres_server.PostmasterInfo.read_from_pgdata(self.pgdata)
        if info is not None and info.is_running():
            return str(info.get_uri())
        self.pgdata.mkdir(parents=True, exist_ok=True)
        runtime = pg.postgres_server.PostgresServer.runtime_path
        socket_dir = pg.utils.find_suitable_socket_dir(self.pgdata, runtime)
        return f"postgresql://postgres:@/postgres?host={socket_dir}"

    def start(self) -> str:
        """initdb if needed, start (or adopt an already running server for this dir); the URI."""
        if self._server is not None:
            return self.uri
        pg = _pgserver()
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        self._forget_dead_handles(pg)
        try:
            try:
                self._server = pg.get_server(self.pgdata, cleanup_mode="stop")
            except Exception as exc:
                # pgserver's handler of the timeout reads the server log, which may not exist
                # yet: then the error is a FileNotFoundError raised while handling it.
                if not any(isinstance(e, subprocess.TimeoutExpired) for e in causes(exc)):
                    raise
                self._server = self._adopt_late_start(pg)
        except Exception as exc:
            raise ServerError(
                f"PostgreSQL did not start in {self.pgdata}: {exc}; "
                f"last lines of {self.log_file}:\n{log_tail(self.log_file)}"
            ) from exc
        atexit.register(self.stop)
        self._uri = str(self._server.get_uri())
        return self._uri

    def _adopt_late_start(self, pg: Any) -> Any:
        """pgserver gives ``pg_ctl start`` a fixed 10 s; on a loaded machine (a CI run, several
        servers starting at once) the server is often ready a moment later. Wait for it (at most
        ``LATE_START_S``), then adopt it: pgserver registered the failed handle before starting,
        so it is dropped first or get_server would hand it back."""
        pg.postgres_server.PostgresServer._instances.pop(self.pgdata, None)
        deadline = time.monotonic() + LATE_START_S
        while time.monotonic() < deadline:
            try:
                info = pg.postgres_server.PostmasterInfo.read_from_pgdata(self.pgdata)
            except (AssertionError, ValueError, OSError):  # postmaster.pid half written
                info = None
            if info is not None and info.is_running() and info.status == "ready":
                return pg.get_server(self.pgdata, cleanup_mode="stop")
            time.sleep(0.2)
        raise ServerError(f"not ready {10 + LATE_START_S:.0f} s after pg_ctl start")

    def _forget_dead_handles(self, pg: Any) -> None:
        """Drop pids of processes that died without cleanup, so our stop() really stops."""
        handles = self.pgdata / ".handle_pids.json"
        if not handles.exists():
            return
        with pg.postgres_server.PostgresServer._lock:
            pids = pg.utils.DiskList(handles)
            pids.put([p for p in pids.get() if psutil.pid_exists(p)])

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the postmaster and wait until none of its processes is left."""
        atexit.unregister(self.stop)
        server, self._server = self._server, None
        if server is None:
            return
        self._uri = None
        procs = self._server_processes(server)
        pg = _pgserver()
        with contextlib.suppress(Exception):  # e.g. its data dir vanished: stopped below anyway
            server.cleanup()
        atexit.unregister(server._cleanup)
        pg.postgres_server.PostgresServer._instances.pop(self.pgdata, None)
        if (self.pgdata / "postmaster.pid").exists() and wait_gone(procs, 0.0):
            # pgserver left it running for another "handle" (maybe a process that died without
            # cleaning up): stop it anyway.
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                pg._commands.pg_ctl(
                    ["-w", "-m", "fast", "stop"],
                    pgdata=self.pgdata,
                    user=server.system_user,
                    timeout=timeout,
                )
        alive = wait_gone(procs, timeout)
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        wait_gone(alive, timeout)

    def _server_processes(self, server: Any) -> list[psutil.Process]:
        pid: int | None
        try:
            pid = int(server.get_pid())
        except Exception:
            pid = self.pid
        if pid is None:
            return []
        try:
            postmaster = psutil.Process(pid)
            return [postmaster, *postmaster.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Postgres(pgdata={str(self.pgdata)!r}, uri={self._uri!r})"


def database_uri(uri: str, name: str) -> str:
    """``uri`` with its database replaced by ``name`` (query such as ``?host=`` is kept)."""
    parts = urlsplit(uri)
    return urlunsplit(parts._replace(path="/" + quote(name, safe="")))


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def create_database(uri: str, name: str) -> str:
    """Create database ``name`` on the server at ``uri``; the URI of the new database."""
    import asyncpg

    conn = await asyncpg.connect(uri)
    try:
        await conn.execute(f"CREATE DATABASE {_quote_ident(name)}")
    finally:
        await conn.close()
    return database_uri(uri, name)


async def drop_database(uri: str, name: str) -> None:
    """Drop database ``name`` (if it exists), disconnecting its remaining clients."""
    import asyncpg

    conn = await asyncpg.connect(uri)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {_quote_ident(name)} WITH (FORCE)")
    finally:
        await conn.close()
