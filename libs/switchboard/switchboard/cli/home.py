"""The data dir of embedded mode (SB_HOME): its layout, the gateway token and pid files."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from pydantic import SecretStr

from switchboard import natsauth
from switchboard.embedded import wait_gone

TOKEN_ENV = "SB_GATEWAY_TOKEN"


class HomeError(RuntimeError):
    """SB_HOME cannot be used as it is; the message says what to do."""


@dataclass(frozen=True)
class Home:
    """``$SB_HOME``: nats/ pg/ run/ logs/ workspaces/ and the gateway-token file."""

    root: Path

    @classmethod
    def resolve(cls, override: str | os.PathLike[str] | None, configured: Path) -> Home:
        """``--home`` wins over the configured one (SB_HOME, else ~/.switchboard)."""
        return cls(Path(override or configured).expanduser().resolve())

    @property
    def nats_dir(self) -> Path:
        return self.root / "nats"

    @property
    def pg_dir(self) -> Path:
        return self.root / "pg"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def workspaces_dir(self) -> Path:
        return self.root / "workspaces"

    @property
    def token_file(self) -> Path:
        return self.root / "gateway-token"

    @property
    def secrets_dir(self) -> Path:
        """The internal credentials: NATS passwords, the gRPC service token."""
        return self.root / "secrets"

    def create(self) -> None:
        """The folders, each readable by this user only (they hold secrets, transcripts...).
        Run again after PostgreSQL started: pgserver widens the folders above its data dir."""
        folders = (
            self.root,
            self.nats_dir,
            self.run_dir,
            self.logs_dir,
            self.workspaces_dir,
            self.secrets_dir,
        )
        # As root, PostgreSQL and sandboxed commands run as users of their own: they may pass
        # through SB_HOME and workspaces/ to their own folders (x, never r: no listing).
        passable = (self.root, self.workspaces_dir) if os.geteuid() == 0 else ()
        for path in folders:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.chmod(0o711 if path in passable else 0o700)

    def pid_file(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)
    source: str  # where a user finds it: the file path, or "SB_GATEWAY_TOKEN"
    generated: bool


def gateway_token(home: Home, configured: SecretStr | None) -> Token:
    """SB_GATEWAY_TOKEN if set (refused when weak), else the stored token, else a new one
    stored with mode 0600."""
    from switchboard import tokens

    if configured is not None and configured.get_secret_value():
        try:
            value = tokens.require_strong(TOKEN_ENV, configured.get_secret_value())
        except tokens.WeakToken as exc:
            raise HomeError(str(exc)) from None
        return Token(value, TOKEN_ENV, generated=False)
    value, generated = _stored_token(home.token_file)
    return Token(value, str(home.token_file), generated=generated)


def _stored_token(path: Path) -> tuple[str, bool]:
    """The token stored in ``path`` (mode 0600), else a new one stored there; and whether it
    is new."""
    if path.exists():
        path.chmod(0o600)
        value = path.read_text().strip()
        if value:
            return value, False
    value = secrets.token_urlsafe(32)
    _write_new(path, value + "\n")
    return value, True


def _write_new(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def nats_credentials(home: Home) -> natsauth.Credentials:
    """The NATS password of every user (``secrets/nats.json``, mode 0600), new ones added."""
    path = home.secrets_dir / "nats.json"
    stored: dict[str, str] = {}
    if path.exists():
        path.chmod(0o600)
        with contextlib.suppress(ValueError):
            loaded = json.loads(path.read_text())
            if isinstance(loaded, dict):
                stored = {k: v for k, v in loaded.items() if isinstance(v, str) and v[:1].isalpha()}
    fresh = natsauth.Credentials.generate().passwords
    passwords = {user: stored.get(user) or fresh[user] for user in natsauth.users()}
    if passwords != stored:
        _write_new(path, json.dumps(passwords, indent=1) + "\n")
    return natsauth.Credentials(passwords)


def service_token(home: Home, configured: SecretStr | None) -> str:
    """SB_SERVICE_TOKEN if set, else the one in ``secrets/service-token`` (made on first use)."""
    if configured is not None and configured.get_secret_value():
        return configured.get_secret_value()
    return _stored_token(home.secrets_dir / "service-token")[0]


# ---------------------------------------------------------------------------------------------
# pid files


def write_pid(path: Path, pid: int) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{pid}\n")
    tmp.replace(path)


def remove_pid(path: Path) -> None:
    path.unlink(missing_ok=True)


def recorded_process(path: Path) -> psutil.Process | None:
    """The live process a pid file names.

    A pid is only trusted when that process started before the file was written, so a pid that
    was reused by an unrelated process since is never touched.
    """
    try:
        pid = int(path.read_text().strip())
        written = path.stat().st_mtime
        proc = psutil.Process(pid)
        if proc.create_time() <= written + 1.0 and proc.status() != psutil.STATUS_ZOMBIE:
            return proc
    except (OSError, ValueError, psutil.Error):
        pass
    return None


def claim(home: Home) -> None:
    """Record this launcher in run/launcher.pid; refuse if another one runs on this SB_HOME."""
    path = home.pid_file("launcher")
    other = recorded_process(path)
    if other is not None and other.pid != os.getpid():
        raise HomeError(
            f"Switchboard is already running from {home.root} (launcher pid {other.pid}); "
            f"stop it first (Ctrl-C in its terminal, or `kill {other.pid}`)"
        )
    write_pid(path, os.getpid())


def reap_stale(home: Home, timeout: float = 5.0) -> list[int]:
    """Stop processes left behind by a launcher that was killed; their pids.

    Each process recorded in run/*.pid (except the launcher's and postgres', which the next start
    adopts) is terminated together with its descendants, then killed if it does not exit.
    """
    victims: list[psutil.Process] = []
    for path in sorted(home.run_dir.glob("*.pid")):
        if path.stem in ("launcher", "postgres"):
            continue
        proc = recorded_process(path)
        if proc is not None:
            with contextlib.suppress(psutil.Error):
                victims += [proc, *proc.children(recursive=True)]
        remove_pid(path)
    for proc in victims:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    for proc in wait_gone(victims, timeout):
        with contextlib.suppress(psutil.Error):
            proc.kill()
    wait_gone(victims, 1.0)
    return [p.pid for p in victims]
