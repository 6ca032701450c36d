"""The data dir of embedded mode (SB_HOME): its layout, the gateway token and pid files."""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from pydantic import SecretStr

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

    def create(self) -> None:
        for path in (self.root, self.nats_dir, self.run_dir, self.logs_dir, self.workspaces_dir):
            path.mkdir(parents=True, exist_ok=True)

    def pid_file(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)
    source: str  # where a user finds it: the file path, or "SB_GATEWAY_TOKEN"
    generated: bool


def gateway_token(home: Home, configured: SecretStr | None) -> Token:
    """SB_GATEWAY_TOKEN if set, else the stored token, else a new one stored with mode 0600."""
    if configured is not None and configured.get_secret_value():
        return Token(configured.get_secret_value(), TOKEN_ENV, generated=False)
    path = home.token_file
    if path.exists():
        path.chmod(0o600)
        value = path.read_text().strip()
        if value:
            return Token(value, str(path), generated=False)
        path.unlink()
    value = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return Token(value, str(path), generated=True)


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
