"""The checks of ``switchboard security audit`` (docs/trust.md): what in the effective
configuration lets the wrong people do too much. Each check reads the settings the services
would read from the same environment (and the data dir's files) and returns findings; nothing
here connects to a running system.

Severities: ``critical`` (a stranger can reach something they should not, or a secret is
exposed: the command exits non-zero), ``warning`` (risky, but a choice an operator may make on
purpose), ``ok`` (checked and fine)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from switchboard import registry, tokens
from switchboard.cli.home import Home
from switchboard.host import settings_class
from switchboard.settings import describe

CRITICAL = "critical"
WARNING = "warning"
OK = "ok"

# Tools that let a run change files, run commands, read or steer other sessions, or act later
# on its own: what a group of strangers must not get. Each with the groups its spec declares
# (the executors' and the agent's tools: group entries of tool policies match them by those).
RISKY_TOOLS: dict[str, tuple[str, ...]] = {
    "write": ("fs", "fs_write"),
    "edit": ("fs", "fs_write"),
    "apply_patch": ("fs", "fs_write"),
    "exec": ("runtime",),
    "process": ("runtime",),
    "sessions_list": ("sessions",),
    "sessions_history": ("sessions",),
    "sessions_send": ("sessions",),
    "sessions_spawn": ("sessions",),
    "cron": ("automation",),
    "a2a_delegate": ("a2a",),
    "github__any": ("mcp",),  # stands for every MCP tool (server__tool)
}


@dataclass(frozen=True)
class Finding:
    severity: str
    check: str
    detail: str
    fix: str = ""


@dataclass
class Config:
    """The effective configuration: each service's settings as it would read them (None when
    they do not validate: reported as a critical finding), and the data dir."""

    settings: dict[str, BaseModel | None]
    problems: dict[str, str]
    home: Home
    environ: Mapping[str, str]

    @classmethod
    def load(cls, environ: Mapping[str, str], home: Home) -> Config:
        loaded: dict[str, BaseModel | None] = {}
        problems: dict[str, str] = {}
        for service in registry.SERVICES:
            try:
                loaded[service.name] = settings_class(service).from_environ(environ)
            except ValidationError as exc:
                loaded[service.name] = None
                problems[service.name] = describe(exc)
            except ValueError as exc:  # a validator's own error, e.g. a weak token
                loaded[service.name] = None
                problems[service.name] = str(exc)
        return cls(loaded, problems, home, environ)

    def get(self, service: str) -> Any:
        return self.settings.get(service)


Check = Callable[[Config], Iterable[Finding]]


def check_valid(config: Config) -> Iterable[Finding]:
    for service, problem in config.problems.items():
        yield Finding(
            CRITICAL,
            "configuration",
            f"the {service} service would refuse its settings: {problem}",
            "fix the settings named (docs/configuration.md)",
        )


# Secrets a person sets by hand: read from the environment itself, so that a weak one is named
# even where it makes its service refuse all its settings (check_valid reports that too).
HAND_SET_SECRETS = (
    "SB_GATEWAY_TOKEN",
    "SB_HOOKS_TOKEN",
    "SB_SERVICE_TOKEN",
    "SB_TELEGRAM_WEBHOOK_SECRET",
    "SB_SLACK_SIGNING_SECRET",
)


def check_secrets(config: Config) -> Iterable[Finding]:
    weak = []
    for name in HAND_SET_SECRETS:
        value = config.environ.get(name, "")
        if value and (why := tokens.weakness(value)) is not None:
            weak.append(f"{name} ({why})")
    stored = config.home.token_file
    if not config.environ.get("SB_GATEWAY_TOKEN") and stored.is_file():
        value = stored.read_text(errors="replace").strip()
        if value and (why := tokens.weakness(value)) is not None:
            weak.append(f"the stored gateway token {stored} ({why})")
    if weak:
        yield Finding(
            CRITICAL,
            "secrets",
            "weak secrets: " + "; ".join(weak),
            f"replace each with {tokens.HOW_TO_MAKE_ONE}",
        )
    else:
        yield Finding(OK, "secrets", "every secret set by hand is strong")


def _loose(path: Path, allow_traverse: bool) -> str | None:
    """Why ``path`` is open to other users (None: it is not, or it does not exist)."""
    try:
        mode = stat.S_IMODE(path.lstat().st_mode)
    except OSError:
        return None
    extra = mode & 0o077
    if allow_traverse and path.is_dir():
        extra &= ~0o011  # passing through (x) without listing, as root's home needs
    if not extra:
        return None
    who = "everyone" if mode & 0o007 else "its group"
    return f"{path} is mode {mode:04o}: {who} can {'read' if extra & 0o044 else 'use'} it"


def check_state(config: Config) -> Iterable[Finding]:
    home = config.home
    if not home.root.exists():
        yield Finding(OK, "state", f"{home.root} does not exist yet (made 0700 at the first run)")
        return
    root_user = os.geteuid() == 0
    loose: list[str] = []
    for path in (home.root, home.workspaces_dir):
        if (why := _loose(path, allow_traverse=root_user)) is not None:
            loose.append(why)
    for path in (home.secrets_dir, home.logs_dir, home.run_dir, home.nats_dir):
        if (why := _loose(path, allow_traverse=False)) is not None:
            loose.append(why)
    secret_files = [home.token_file]
    if home.secrets_dir.is_dir():
        secret_files += sorted(p for p in home.secrets_dir.iterdir() if p.is_file())
    for path in secret_files:
        if (why := _loose(path, allow_traverse=False)) is not None:
            loose.append(why)
    if loose:
        yield Finding(
            CRITICAL,
            "state",
            "; ".join(loose),
            f"chmod 700 on the folders and 600 on the files named (or chmod -R go-rwx "
            f"{home.root}; `switchboard up` sets them again on its next start)",
        )
    else:
        yield Finding(OK, "state", f"{home.root} and its secrets are readable by this user only")


def check_sandbox(config: Config) -> Iterable[Finding]:
    tools = config.get("tools")
    if tools is None:
        return
    required = str(getattr(tools, "exec_require", ""))
    disabled = {x.strip() for x in str(getattr(tools, "exec_disable_layers", "")).split(",")}
    confined = "landlock" in required or "namespaces" in required
    if not confined:
        yield Finding(
            CRITICAL,
            "sandbox",
            "commands need no filesystem confinement (SB_EXEC_REQUIRE does not name landlock or"
            " namespaces): on a host without them `exec` runs unconfined",
            "unset SB_EXEC_REQUIRE (default landlock|namespaces) and install bubblewrap or use a"
            " kernel with Landlock; `switchboard doctor` says what the host offers",
        )
    elif {"landlock", "namespaces"} <= disabled:
        yield Finding(
            CRITICAL,
            "sandbox",
            "SB_EXEC_DISABLE_LAYERS switches off both filesystem layers: every command is refused"
            " or, with SB_EXEC_REQUIRE changed, unconfined",
            "remove landlock and namespaces from SB_EXEC_DISABLE_LAYERS",
        )
    else:
        mode = getattr(tools, "exec_mode", "allowlist")
        yield Finding(OK, "sandbox", f"commands require {required} (exec mode {mode})")
