"""Changes of the configuration file without restarts (docs/config-file.md): the file is
watched, a changed file is checked as a whole like at start, and the settings of
:data:`RELOADABLE` that changed are handed to the running services (:mod:`switchboard.reloads`);
any other change is logged as needing a restart of the programs that read it. A refused file
changes nothing: the running configuration stays.

The environment still wins over the file: a variable the process had from its environment (not
from the file: ``SB_CONFIG_FROM_FILE`` says which did) keeps its value whatever the file says.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .errors import ConfigError

log = logging.getLogger(__name__)
POLL_S = 1.0  # how often the file's mtime and size are looked at (one stat)

# The settings applied to running services, by variable; one place (docs/config-file.md lists
# them). Router: who may talk (policies, allowlists, owners) and where messages go (bindings);
# agent: the model chain, the budgets, the tool policies and approval rules; scheduler: quiet
# hours; tools: the MCP servers.
RELOADABLE: dict[str, str] = {
    "SB_DM_POLICY": "router",
    "SB_GROUP_POLICY": "router",
    "SB_GROUP_ACTIVATION": "router",
    "SB_CHANNEL_SECURITY": "router",
    "SB_OWNERS": "router",
    "SB_APPROVERS": "router",
    "SB_BINDINGS": "router",
    "SB_MODEL": "agent",
    "SB_MODEL_FALLBACKS": "agent",
    "SB_MODEL_TIERS": "agent",
    "SB_AGENT_MODELS": "agent",
    "SB_BUDGET": "agent",
    "SB_PRICES": "agent",
    "SB_TOOL_POLICY": "agent",
    "SB_AGENT_TOOL_POLICIES": "agent",
    "SB_SUBAGENT_TOOL_POLICY": "agent",
    "SB_TOOL_APPROVALS": "agent",
    "SB_GROUP_TOOL_PROFILE": "agent",
    "SB_QUIET_HOURS": "scheduler",
    "SB_MCP_SERVERS": "tools",
    # Gateway: the chat channels' accounts (named, and the single-account settings of default).
    "SB_TELEGRAM_ACCOUNTS": "gateway",
    "SB_TELEGRAM_BOT_TOKEN": "gateway",
    "SB_TELEGRAM_WEBHOOK_SECRET": "gateway",
    "SB_TELEGRAM_MODE": "gateway",
    "SB_TELEGRAM_WEBHOOK_URL": "gateway",
    "SB_TELEGRAM_API_BASE": "gateway",
    "SB_SLACK_ACCOUNTS": "gateway",
    "SB_SLACK_BOT_TOKEN": "gateway",
    "SB_SLACK_SIGNING_SECRET": "gateway",
    "SB_SLACK_API_BASE": "gateway",
    "SB_DISCORD_ACCOUNTS": "gateway",
    "SB_DISCORD_BOT_TOKEN": "gateway",
    "SB_DISCORD_PUBLIC_KEY": "gateway",
    "SB_DISCORD_APPLICATION_ID": "gateway",
    "SB_DISCORD_API_BASE": "gateway",
    "SB_DISCORD_GATEWAY": "gateway",
}
# SB_<CHANNEL>_ALLOW_FROM and the other per-channel variables of the router.
_CHANNEL = re.compile(
    r"SB_[A-Z0-9][A-Z0-9_-]*?_"
    r"(DM_POLICY|ALLOW_FROM|GROUP_POLICY|GROUPS|GROUP_ALLOW_FROM|GROUP_ACTIVATION)"
)

Apply = Callable[[dict[str, str | None]], Awaitable[None]]


def reloadable(env: str) -> bool:
    return env in RELOADABLE or _CHANNEL.fullmatch(env) is not None


@cache
def readers(env: str) -> tuple[str, ...]:
    """The programs that read ``env`` (the settings reference's model)."""
    from switchboard.settings_reference import collect, sources

    for setting in collect(sources()):
        if env in (setting.env, *setting.aliases):
            return setting.services
    return ()


@dataclass(frozen=True)
class Diff:
    """What changed between two mappings of the file's variables."""

    apply: dict[str, str | None] = field(default_factory=dict)  # None: no longer set
    restart: dict[str, tuple[str, ...]] = field(default_factory=dict)  # variable -> readers


def diff(old: Mapping[str, str], new: Mapping[str, str]) -> Diff:
    result = Diff()
    for env in sorted(old.keys() | new.keys()):
        value = new.get(env)
        if old.get(env) == value:
            continue
        if reloadable(env):
            result.apply[env] = value
        else:
            result.restart[env] = readers(env)
    return result


def effective(file_environ: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
    """The file's variables that the environment ``base`` does not set (under any name)."""
    from .keys import catalog

    aliases = {
        setting.env: setting.aliases
        for keys in catalog().sections.values()
        for setting in keys.values()
    }
    return {
        env: value
        for env, value in file_environ.items()
        if not any(n in base for n in (env, *aliases.get(env, ())))
    }


class Watcher:
    """Watches ``path`` (a stat every :data:`POLL_S`, or at once after :meth:`trigger`) and
    hands the reloadable changes to ``apply``. ``environ``: the process's environment at start,
    in which ``from_file`` came from the file; ``hosting``: the programs this process runs (a
    change that needs a restart is logged by those that read it)."""

    def __init__(
        self,
        path: Path,
        environ: Mapping[str, str],
        from_file: Collection[str],
        apply: Apply,
        hosting: Collection[str],
        poll_s: float = POLL_S,
    ) -> None:
        self.path = path
        self.base = {k: v for k, v in environ.items() if k not in from_file}
        self.current = {k: environ[k] for k in from_file if k in environ}  # in effect
        self.apply = apply
        self.hosting = set(hosting)
        self.poll_s = poll_s
        self._seen = self._stamp()
        self._wake = asyncio.Event()

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            found = os.stat(self.path)  # follows a ConfigMap's symlinks to the new data
        except FileNotFoundError:
            return None
        return (found.st_mtime_ns, found.st_size, found.st_ino)

    def trigger(self) -> None:
        """Check now (SIGHUP), whether or not the file looks changed."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # the poll's tick: no trigger came
                await asyncio.wait_for(self._wake.wait(), self.poll_s)
            woken, stamp = self._wake.is_set(), self._stamp()
            self._wake.clear()
            if stamp is not None and (woken or stamp != self._seen):
                self._seen = stamp
                await self.check()

    async def check(self) -> Diff | None:
        """Load and check the file; apply what may be; None when it is refused."""
        from .load import load

        try:  # jsonschema and every settings class: off the event loop
            loaded = await asyncio.to_thread(load, self.path, self.base)
        except ConfigError as exc:
            for problem in exc.problems:
                log.error("configuration file refused, nothing changed: %s", problem)
            return None
        except OSError as exc:  # removed or replaced while read: the next change is checked
            log.error("configuration file %s not read, nothing changed: %s", self.path, exc)
            return None
        found = diff(self.current, effective(loaded.environ, self.base))
        for env, who in found.restart.items():
            if self.hosting & set(who):
                names = ", ".join(who)
                log.warning(
                    "%s changed in %s: needs a restart of %s (not applied)", env, self.path, names
                )
        if found.apply:
            log.info("configuration file changed: applying %s", ", ".join(found.apply))
            await self.apply(found.apply)
            for env, value in found.apply.items():
                if value is None:
                    self.current.pop(env, None)
                else:
                    self.current[env] = value
        return found
