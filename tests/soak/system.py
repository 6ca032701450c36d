"""The system under faults: PostgreSQL (pgserver) and NATS (a cluster of three when the
library has it) started here so the chaos driver can kill and restart them, the platform fakes,
two proxies whose connections can be cut, and every service as its own process (agent, tools
and scheduler twice) under the launcher's own :class:`Supervisor`, which restarts a killed one
as ``switchboard up --processes`` does. (The launcher cannot run against a NATS it did not
start, so its supervisor is used directly, with the environment it would build.)"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from starlette.requests import ClientDisconnect

from switchboard import registry
from switchboard.cli.home import Home
from switchboard.cli.supervisor import Instance, ServiceSpec, Supervisor, plan_instances
from switchboard.embedded import Postgres, free_port
from switchboard.host import Backoff, settings_class
from switchboard.settings import scoped_environ
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM
from tests.fakes.slack import FakeSlack, SlackEvents
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.soak.model import script
from tests.soak.nats_backend import NatsBackend, make_nats
from tests.soak.proxy import Proxy
from tests.support.workers import base_env

SCALE = {"agent": 2, "tools": 2, "scheduler": 2}
TELEGRAM_SECRET = "tg-soak-" + uuid.uuid4().hex
SLACK_BOT = "U0SOAKBOT"


@dataclass
class Fakes:
    llm: FakeLLM
    telegram: FakeTelegram
    updates: TelegramUpdates
    slack: FakeSlack
    events: SlackEvents
    discord: FakeDiscord


@dataclass
class System:
    root: Path
    want_cluster: bool = True
    home: Home = field(init=False)
    nats: NatsBackend = field(init=False)
    postgres: Postgres = field(init=False)
    database_url: str = ""
    token: str = field(default_factory=lambda: "soak-token-" + secrets.token_hex(16))
    http_port: int = 0
    fakes: Fakes | None = None
    gateway_proxy: Proxy | None = None
    model_proxy: Proxy | None = None
    supervisor: Supervisor | None = None
    seen_pids: set[int] = field(default_factory=set)  # every service process ever started
    rss_start: dict[str, int] = field(default_factory=dict)
    rss_end: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = Home(self.root / "home")
        self.nats = make_nats(self.root / "nats", self.want_cluster)
        self.postgres = Postgres(self.root / "pg")

    # ---- where clients go

    @property
    def url(self) -> str:
        """The gateway through the proxy whose connections the chaos driver cuts."""
        assert self.gateway_proxy is not None
        return self.gateway_proxy.url

    @property
    def direct_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def instances(self) -> list[Instance]:
        return self.supervisor.instances if self.supervisor is not None else []

    # ---- start and stop

    async def start(self, fakes: Fakes, ready_timeout: float = 180.0) -> None:
        self.fakes = fakes
        self.home.create()
        await asyncio.to_thread(self.nats.start)
        self.database_url = await asyncio.to_thread(self.postgres.start)
        self.home.create()  # pgserver opened up the folders above its data dir
        self.model_proxy = Proxy("127.0.0.1", fakes.llm.port)
        await self.model_proxy.start()
        self.http_port = free_port()
        self.gateway_proxy = Proxy("127.0.0.1", self.http_port)
        await self.gateway_proxy.start()
        instances = plan_instances(
            [ServiceSpec(s, SCALE.get(s.name, 1)) for s in registry.SERVICES],
            self._common_env(fakes),
            self.home,
            Backoff(initial=0.5, maximum=5.0, reset_after=30.0),
            reserved_ports={self.http_port, self.gateway_proxy.port, self.model_proxy.port},
        )
        for inst in instances:  # as the launcher: own secrets only, own NATS user
            inst.env = scoped_environ(settings_class(inst.service), inst.env)
            inst.env.update(self.nats.service_env(inst.service.name))
        log = (self.home.logs_dir / "supervisor.log").open("a", buffering=1)
        self.supervisor = Supervisor(instances, stop_timeout=10.0, err=log)
        await self.supervisor.start()
        self.note_pids()
        if not await self.wait_ready(ready_timeout):
            raise RuntimeError(f"the services were not ready in {ready_timeout:.0f} s")

    def _common_env(self, fakes: Fakes) -> dict[str, str]:
        assert self.model_proxy is not None
        workspaces = self.home.workspaces_dir
        env = {
            **base_env(),
            "PYTHONUNBUFFERED": "1",
            "SB_DATABASE_URL": self.database_url,
            "SB_SERVICE_TOKEN": "soak-service-" + secrets.token_hex(12),
            "SB_HOME": str(self.home.root),
            "SB_GATEWAY_TOKEN": self.token,
            "SB_HTTP_PORT": str(self.http_port),
            "SB_WORKSPACES_DIR": str(workspaces),
            "SB_LOG_LEVEL": "INFO",
            "SB_DM_POLICY": "open",  # made-up senders on every channel
            "OPENAI_API_KEY": "sk-soak",
            "OPENAI_BASE_URL": f"{self.model_proxy.url}/v1",
            "SB_TELEGRAM_BOT_TOKEN": fakes.telegram.token,
            "SB_TELEGRAM_WEBHOOK_SECRET": TELEGRAM_SECRET,
            "SB_TELEGRAM_API_BASE": fakes.telegram.base_url,
            "SB_TELEGRAM_WEBHOOK_URL": "https://bot.example.com/channels/telegram/default",
            "SB_SLACK_BOT_TOKEN": fakes.slack.token,
            "SB_SLACK_SIGNING_SECRET": fakes.events.secret,
            "SB_SLACK_API_BASE": fakes.slack.base_url,
            "SB_DISCORD_BOT_TOKEN": fakes.discord.token,
            "SB_DISCORD_PUBLIC_KEY": fakes.discord.interactions.public_key,
            "SB_DISCORD_APPLICATION_ID": fakes.discord.interactions.application_id,
            "SB_DISCORD_API_BASE": fakes.discord.base_url,
        }
        workspaces.chmod(0o755)  # the sandbox's unprivileged uid must reach its workspace
        for service in registry.SERVICES:
            for port in service.ports:
                env[port.host_setting] = "127.0.0.1"
        return env

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.direct_url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    async def wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await asyncio.to_thread(self.ready) and self.all_running():
                return True
            await asyncio.sleep(0.5)
        return False

    def all_running(self) -> bool:
        return all(i.proc is not None and i.proc.returncode is None for i in self.instances)

    def note_pids(self) -> None:
        """Remember every service process (and its children: sandboxed commands) seen."""
        for inst in self.instances:
            if inst.pid is None:
                continue
            self.seen_pids.add(inst.pid)
            with contextlib.suppress(psutil.Error):
                self.seen_pids.update(c.pid for c in psutil.Process(inst.pid).children(True))

    def rss(self) -> dict[str, int]:
        """Each service process's resident memory now (bytes)."""
        sizes = {}
        for inst in self.instances:
            if inst.pid is None:
                continue
            with contextlib.suppress(psutil.Error):
                sizes[inst.name] = psutil.Process(inst.pid).memory_info().rss
        return sizes

    def restarts(self) -> dict[str, int]:
        return {i.name: i.restarts for i in self.instances}

    async def stop(self) -> list[dict[str, Any]]:
        """Services, then NATS and PostgreSQL, then the proxies; every process of the run still
        alive afterwards (should be none)."""
        self.note_pids()
        candidates = set(self.seen_pids)
        candidates.update(self.nats.pids())
        with contextlib.suppress(Exception):
            pid = self.postgres.pid
            if pid is not None:
                candidates.add(pid)
                candidates.update(c.pid for c in psutil.Process(pid).children(True))
        if self.supervisor is not None:
            await self.supervisor.stop()
        await asyncio.to_thread(self.nats.stop)
        await asyncio.to_thread(self.postgres.stop)
        for proxy in (self.gateway_proxy, self.model_proxy):
            if proxy is not None:
                await proxy.stop()
        return await asyncio.to_thread(self._left, candidates)

    def _left(self, candidates: set[int]) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 10
        while True:
            left = []
            for proc in psutil.process_iter(["pid", "cmdline", "status"]):
                if proc.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
                cmdline = " ".join(proc.info["cmdline"] or [])
                ours = proc.info["pid"] in candidates or str(self.root) in cmdline
                if ours and proc.info["pid"] != os.getpid():
                    left.append({"pid": proc.info["pid"], "cmdline": cmdline[:200]})
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)


def new_root() -> Path:
    """Not under pytest's tmp tree: pgserver runs PostgreSQL as another user when we are root
    and opens up the folders above its data dir (tests/support/servers.py)."""
    return Path(tempfile.mkdtemp(prefix="sb-soak-", dir="/tmp"))


class _NoDisconnects(logging.Filter):
    """A client that went away mid request (the chaos driver cut its connection, or killed
    the agent calling the fake model) is expected here: no traceback for it."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, ClientDisconnect)


@contextlib.contextmanager
def fakes() -> Any:
    logging.getLogger("uvicorn.error").addFilter(_NoDisconnects())
    with (
        FakeLLM(script) as llm,
        FakeTelegram() as telegram,
        FakeSlack(bot_user_id=SLACK_BOT) as slack,
        FakeDiscord() as discord,
    ):
        updates = TelegramUpdates(TELEGRAM_SECRET, bot_username=telegram.username,
                                  bot_id=telegram.bot_id)  # fmt: skip
        yield Fakes(llm, telegram, updates, slack, SlackEvents(bot_user_id=SLACK_BOT), discord)


def remove_root(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
