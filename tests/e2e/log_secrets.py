"""The system of test_secrets_in_logs.py and its log scan.

One ``switchboard up --processes`` (the launcher's own nats-server with a user and password
per service, its own PostgreSQL) configured with every credential it can hold: the three
channels against their fakes, both model providers' keys against the fake model, the memory
service's embedding key against the fake embeddings, the media service's transcription key,
the gateway, hooks and service tokens, hook mappings' token and signing secret. Every value is
random and made for this run, so finding one in a log can only mean it was logged.

:func:`leaks` reads every log the system writes (each file under ``$SB_HOME/logs``: one per
service process and nats-server's; PostgreSQL's log in ``$SB_HOME/pg``; what the launcher
printed, i.e. its stdout and stderr) and reports each place where a secret appears whole, or
its first or last :data:`FRAGMENT` characters do (a cut or masked value is still a leak)."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from switchboard.cli.home import Home, nats_credentials
from switchboard.tokens import generate
from tests.fakes.discord import FakeDiscord
from tests.fakes.embeddings import FakeEmbeddings
from tests.fakes.llm import FakeLLM, tool_then_text
from tests.fakes.slack import FakeSlack, SlackEvents
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.support.stack import Stack, start_stack, stop_stack

FRAGMENT = 12  # characters of a secret's random part that count as the secret
TELEGRAM_WEBHOOK_URL = "https://bot.example.com/channels/telegram/default"


@dataclass(frozen=True)
class Secret:
    """``value``; ``public`` is a leading part that is no secret (a Telegram bot id, "sk-"...)
    and is left out of the fragments looked for."""

    name: str
    value: str
    public: str = ""

    def fragments(self) -> set[str]:
        body = self.value[len(self.public) :]
        assert len(body) >= 2 * FRAGMENT, f"{self.name} is too short to be told apart"
        return {body[:FRAGMENT], body[-FRAGMENT:]}


def random_part(prefix: str = "", n: int = 24) -> str:
    return prefix + secrets.token_hex(n)


@dataclass
class LogSystem:
    stack: Stack
    llm: FakeLLM
    telegram: FakeTelegram
    updates: TelegramUpdates
    slack: FakeSlack
    events: SlackEvents
    discord: FakeDiscord
    embeddings: FakeEmbeddings
    secrets: list[Secret]
    hook_token: str  # SB_HOOKS_MAPPINGS' "ticket" mapping's own token
    hook_signing_secret: str  # the "signed" mapping's HMAC secret
    canaries: list[Secret] = field(default_factory=list)  # logged on purpose: the control

    @property
    def home(self) -> Path:
        return self.stack.home

    def add_secret(self, name: str, value: str, public: str = "") -> None:
        """A credential met during the run (a Discord interaction's token)."""
        self.secrets.append(Secret(name, value, public))


def log_sources(system: LogSystem) -> dict[str, str]:
    """Every log of the system, by name: the files under $SB_HOME/logs, PostgreSQL's log,
    and the launcher's own output."""
    home = Home(system.home)
    files = [p for p in sorted(home.logs_dir.rglob("*")) if p.is_file()]
    files += [p for p in sorted(home.pg_dir.glob("log*")) if p.is_file()]
    found = {str(p.relative_to(home.root)): p.read_text(errors="replace") for p in files}
    found["switchboard up (stdout+stderr)"] = system.stack.log()
    return found


def leaks(sources: dict[str, str], wanted: list[Secret]) -> list[str]:
    """Where each secret of ``wanted`` appears: "<name> in <source> line <n>: <line's start>"."""
    found: list[str] = []
    for source, text in sources.items():
        for number, line in enumerate(text.splitlines(), 1):
            for secret in wanted:
                if secret.value in line or any(f in line for f in secret.fragments()):
                    found.append(f"{secret.name} in {source} line {number}: {line[:160]}")
    return found


def assert_no_secret_logged(system: LogSystem) -> None:
    sources = log_sources(system)
    # Scanning nothing would pass: the services' logs, nats-server's and PostgreSQL's are there.
    names = set(sources)
    for expected in ("logs/gateway-0.log", "logs/agent-0.log", "logs/nats.log", "pg/log"):
        assert expected in names, sorted(names)
    found = leaks(sources, system.secrets)
    assert found == [], "secrets in the logs:\n" + "\n".join(found)


SITE = """\
import os, sys
sys.stderr.write({line!r} + "\\n")
sys.stderr.flush()
"""


@contextlib.contextmanager
def log_system(home: Path, canary_dir: Path, canary: str) -> Iterator[LogSystem]:
    """The system, its fakes, and the secrets it was given. ``canary``: a made-up secret each
    Python process of it (launcher and services) prints to its stderr at start, through
    a ``sitecustomize`` in ``canary_dir`` (the negative control's planted leak)."""
    canary_dir.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"level": "INFO", "msg": f"canary {canary}"})
    (canary_dir / "sitecustomize.py").write_text(SITE.format(line=line))
    tg_token = f"7{secrets.randbelow(10**9):09d}:{random_part('AAH', 16)}"
    with contextlib.ExitStack() as stack:
        telegram = stack.enter_context(FakeTelegram(tg_token))
        slack = stack.enter_context(FakeSlack(random_part("xoxb-")))
        discord = stack.enter_context(FakeDiscord())
        openai_key, anthropic_key = random_part("sk-"), random_part("sk-ant-")
        llm = stack.enter_context(FakeLLM(tool_then_text()))
        embedding_key = random_part("sk-emb-")
        embeddings = stack.enter_context(FakeEmbeddings(require_key=embedding_key))
        tg_secret, slack_secret = random_part("tg"), random_part()
        hooks_token, hook_token, hook_signing = generate(), generate(), generate()
        service, gateway = generate(), generate()
        mappings = {
            "ticket": {"action": "wake", "message": "Ticket {{payload.id}}", "token": hook_token},
            "signed": {
                "action": "wake",
                "message": "Push {{payload.ref}}",
                "signature": {"secret": hook_signing},
            },
        }
        env = {
            "PYTHONPATH": str(canary_dir),
            "SB_DM_POLICY": "open",  # chats from made-up people (the router has its own tests)
            "SB_GATEWAY_TOKEN": gateway,
            "SB_SERVICE_TOKEN": service,
            "SB_MODEL": "openai:gpt-4o-mini",
            "OPENAI_API_KEY": openai_key,
            "OPENAI_BASE_URL": llm.openai_base_url,
            "ANTHROPIC_API_KEY": anthropic_key,
            "ANTHROPIC_BASE_URL": llm.base_url,
            "SB_EMBEDDING_PROVIDER": "openai",
            "SB_EMBEDDING_BASE_URL": embeddings.base_url,
            "SB_EMBEDDING_API_KEY": embedding_key,
            "SB_EMBEDDING_DIMENSION": str(embeddings.dimension),
            "SB_MEMORY_SYNC_QUIET_MS": "0",
            "SB_TRANSCRIPTION_API_KEY": random_part("sk-tr-"),
            "SB_TRANSCRIPTION_BASE_URL": llm.openai_base_url,  # configured, never called
            "SB_TELEGRAM_BOT_TOKEN": telegram.token,
            "SB_TELEGRAM_WEBHOOK_SECRET": tg_secret,
            "SB_TELEGRAM_API_BASE": telegram.base_url,
            "SB_TELEGRAM_WEBHOOK_URL": TELEGRAM_WEBHOOK_URL,
            "SB_SLACK_BOT_TOKEN": slack.token,
            "SB_SLACK_SIGNING_SECRET": slack_secret,
            "SB_SLACK_API_BASE": slack.base_url,
            "SB_DISCORD_BOT_TOKEN": discord.token,
            "SB_DISCORD_PUBLIC_KEY": discord.interactions.public_key,
            "SB_DISCORD_APPLICATION_ID": discord.interactions.application_id,
            "SB_DISCORD_API_BASE": discord.base_url,
            "SB_DISCORD_GATEWAY": "true",
            "SB_OUTBOUND_MAX_ATTEMPTS": "3",
            "SB_HOOKS_TOKEN": hooks_token,
            "SB_HOOKS_MAPPINGS": json.dumps(mappings),
            # The most every library writes: a secret in a DEBUG line counts too.
            "SB_LOG_LEVEL": "DEBUG",
        }
        run = start_stack(home, env, timeout=180, args=["--processes"])
        run.token = gateway  # env wins over the helper's own token
        try:
            nats_passwords = nats_credentials(Home(home)).passwords
            given = [
                Secret("SB_GATEWAY_TOKEN", gateway),
                Secret("SB_SERVICE_TOKEN", service),
                Secret("OPENAI_API_KEY", openai_key, "sk-"),
                Secret("ANTHROPIC_API_KEY", anthropic_key, "sk-ant-"),
                Secret("SB_EMBEDDING_API_KEY", embedding_key, "sk-emb-"),
                Secret("SB_TRANSCRIPTION_API_KEY", env["SB_TRANSCRIPTION_API_KEY"], "sk-tr-"),
                Secret("SB_TELEGRAM_BOT_TOKEN", tg_token, tg_token.partition(":")[0] + ":AAH"),
                Secret("SB_TELEGRAM_WEBHOOK_SECRET", tg_secret, "tg"),
                Secret("SB_SLACK_BOT_TOKEN", slack.token, "xoxb-"),
                Secret("SB_SLACK_SIGNING_SECRET", slack_secret),
                Secret("SB_DISCORD_BOT_TOKEN", discord.token, "MTA"),
                Secret("SB_HOOKS_TOKEN", hooks_token),
                Secret("SB_HOOKS_MAPPINGS ticket.token", hook_token),
                Secret("SB_HOOKS_MAPPINGS signed.signature.secret", hook_signing),
                *(Secret(f"NATS password of {u}", p) for u, p in nats_passwords.items()),
            ]
            yield LogSystem(
                stack=run,
                llm=llm,
                telegram=telegram,
                updates=TelegramUpdates(tg_secret, telegram.username, telegram.bot_id),
                slack=slack,
                events=SlackEvents(slack_secret),
                discord=discord,
                embeddings=embeddings,
                secrets=given,
                hook_token=hook_token,
                hook_signing_secret=hook_signing,
                canaries=[Secret("canary", canary)],
            )
        finally:
            left = stop_stack(run)
            assert left == [], f"processes left behind: {left}"
