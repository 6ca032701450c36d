"""What the trust attack tests of issue 23 share (tests/e2e/test_trust_*.py): a model that does
what the chat asks, the three fake platforms wired to one system, and ways to speak in their
chats through the gateway's real webhooks and read what came back.

The model (:func:`obedient`) stands in for a prompt-injected one: every line ``call <tool>
<json args>`` of the last user message becomes a tool call (several lines, several calls in one
turn); after tool results it answers ``[<tag>] RESULTS:`` and the results, so a test reads in
the platform's sent messages (or in the model's recorded requests) what a tool returned. Every
message a test sends carries a tag ``[t-<hex>]`` that the reply repeats: the tests of a module
share one system and find their own messages by it."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.helpers import client, metric, wait_for
from tests.fakes.discord import FakeDiscord
from tests.fakes.discord_interactions import user as discord_user
from tests.fakes.discord_ws import message_create
from tests.fakes.llm import FakeLLM, FakeRequest, RecordedCall, Reply
from tests.fakes.slack import FakeSlack, SlackEvents
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.lanes.pipeline import settle
from tests.support.services import ServiceProcesses

_CALL = re.compile(r"(?:^|\s)call ([a-z_][a-z0-9_]*)(?:\s+(\{.*\}))?\s*$")
_TAG = re.compile(r"\[(t-[0-9a-f]{10})\]")
SLACK_BOT = "U0BOT"
WAIT_S = 90.0  # a run under load (two CPU cores, several stacks): generous


def tag() -> str:
    """A unique tag for one message (``t-`` and 10 hex digits)."""
    return "t-" + uuid.uuid4().hex[:10]


def call(tool: str, **args: Any) -> str:
    """One ``call`` line of a chat message: the model calls ``tool`` with ``args``."""
    return f"call {tool} {json.dumps(args)}"


def obedient(req: FakeRequest) -> Reply:
    """Does what the chat asks (see the module's docstring)."""
    found = _TAG.search(req.last_user_text)
    label = f"[{found.group(1)}] " if found else ""
    if req.last_tool_results:
        return Reply(text=label + "RESULTS:\n" + "\n----\n".join(req.last_tool_results))
    calls: list[tuple[str, dict[str, Any]]] = []
    for line in req.last_user_text.splitlines():
        asked = _CALL.search(line)
        if asked:
            calls.append((asked.group(1), json.loads(asked.group(2)) if asked.group(2) else {}))
    if calls:
        return Reply(tool_calls=calls)
    return Reply(text=label + "ok")


# --- the model's side -------------------------------------------------------------------------


def calls_for(llm: FakeLLM, label: str) -> list[RecordedCall]:
    """The model calls of the run started by the message tagged ``label``."""
    return [c for c in llm.calls if label in c.request.last_user_text]


def mentions(llm: FakeLLM, label: str) -> list[RecordedCall]:
    """Every model call whose request holds ``label`` anywhere (any message, the system)."""
    return [c for c in llm.calls if label in json.dumps(c.request.body)]


def first_call(llm: FakeLLM, label: str) -> RecordedCall:
    """The run's first model call: the tools offered and the system prompt."""
    found: list[RecordedCall] = wait_for(
        lambda: calls_for(llm, label), WAIT_S, f"a model call for {label}"
    )
    return found[0]


def results(llm: FakeLLM, label: str) -> list[str]:
    """What the tools returned to the run of ``label`` (its call after the tool results)."""
    done: list[RecordedCall] = wait_for(
        lambda: [c for c in calls_for(llm, label) if c.request.last_tool_results],
        WAIT_S,
        f"the tool results of {label}",
    )
    return list(done[0].request.last_tool_results)


# --- the system -------------------------------------------------------------------------------


@contextlib.contextmanager
def workspaces_dir(files: Mapping[str, str] | None = None) -> Iterator[Path]:
    """A workspaces root in /tmp (the sandbox's uid must reach it: 0755), the agent ``main``'s
    workspace seeded with ``files``; removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="sb-ws-", dir="/tmp"))
    root.chmod(0o755)
    try:
        (root / "main").mkdir()
        for name, text in (files or {}).items():
            (root / "main" / name).write_text(text)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def running_system(
    home: Path,
    nats_url: str,
    database_url: str,
    llm: FakeLLM,
    workspaces: Path,
    env: Mapping[str, str],
) -> Iterator[ServiceProcesses]:
    """Every service as a real process against the fake model (the services' own defaults
    otherwise: no DM policy is set here, unlike ``with_fake_model``)."""
    settings = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": f"{llm.base_url}/v1",
        "SB_WORKSPACES_DIR": str(workspaces),
        "SB_LOG_LEVEL": "INFO",
        **env,
    }
    procs = ServiceProcesses(home, nats_url, database_url, settings)
    procs.llm = llm  # type: ignore[attr-defined]
    procs.start()
    try:
        yield procs
    finally:
        procs.stop()


class Platforms:
    """Fake Telegram, Slack and Discord, and the gateway settings that wire them."""

    def __init__(self) -> None:
        self.tg = FakeTelegram()
        self.slack = FakeSlack(bot_user_id=SLACK_BOT)
        self.discord = FakeDiscord()
        self.updates = TelegramUpdates(
            "tg-trust-" + uuid.uuid4().hex, bot_username=self.tg.username, bot_id=self.tg.bot_id
        )
        self.events = SlackEvents(bot_user_id=SLACK_BOT)

    def __enter__(self) -> Platforms:
        self.tg.start()
        self.slack.start()
        self.discord.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.discord.stop()
        self.slack.stop()
        self.tg.stop()

    def env(self) -> dict[str, str]:
        return {
            "SB_TELEGRAM_BOT_TOKEN": self.tg.token,
            "SB_TELEGRAM_WEBHOOK_SECRET": self.updates.secret,  # webhook mode, no URL to set
            "SB_TELEGRAM_API_BASE": self.tg.base_url,
            "SB_SLACK_BOT_TOKEN": self.slack.token,
            "SB_SLACK_SIGNING_SECRET": self.events.secret,
            "SB_SLACK_API_BASE": self.slack.base_url,
            "SB_DISCORD_BOT_TOKEN": self.discord.token,
            "SB_DISCORD_PUBLIC_KEY": self.discord.interactions.public_key,
            "SB_DISCORD_APPLICATION_ID": self.discord.interactions.application_id,
            "SB_DISCORD_API_BASE": self.discord.base_url,
            "SB_DISCORD_GATEWAY": "true",
        }


class Chats:
    """Speaking in the platforms' chats through the gateway's real entry points: Telegram's
    webhook with its secret header, signed Slack Events API calls, Discord's gateway
    websocket (``MESSAGE_CREATE``); and what the bot sent back."""

    def __init__(self, services: ServiceProcesses, platforms: Platforms) -> None:
        self.services = services
        self.p = platforms

    # --- Telegram

    def telegram(self, text: str, sender: int, group: int | None = None) -> None:
        """A message from ``sender`` in its DM with the bot, or in ``group`` (mentioning the
        bot, as group messages must to run)."""
        person = self.p.updates.user(sender, first_name=f"P{sender}", username=f"p{sender}")
        if group is None:
            update = self.p.updates.message(text, user=person)
        else:
            if not text.startswith("/"):
                text = f"@{self.p.tg.username}\n{text}"
            update = self.p.updates.message(text, user=person, chat=self.p.updates.group(group))
        body, headers = self.p.updates.webhook(update)
        response = httpx.post(
            self.services.url + "/channels/telegram/default",
            content=body,
            headers=headers,
            timeout=30,
        )
        assert response.status_code == 200, response.text

    def telegram_texts(self, chat: int) -> list[str]:
        return [s.text for s in self.p.tg.sent_to(chat)]

    # --- Slack

    def slack(self, text: str, sender: str, channel: str, direct: bool = False) -> None:
        """A DM (``direct``: a message in an im channel) or a mention in ``channel``."""
        if direct:
            event = self.p.events.message(sender, text, channel)
        else:
            event = self.p.events.app_mention(sender, f"<@{SLACK_BOT}> {text}", channel)
        body, headers = self.p.events.request(self.p.events.envelope(event))
        response = httpx.post(
            self.services.url + "/channels/slack/default", content=body, headers=headers, timeout=30
        )
        assert response.status_code == 200, response.text

    def slack_texts(self, channel: str) -> list[str]:
        return [p.text for p in self.p.slack.posts if p.channel == channel]

    # --- Discord

    def discord(self, text: str, sender: str, channel: str, guild: str | None = None) -> None:
        """A DM over the gateway connection, or a message in a guild's channel that mentions
        the bot."""
        gateway = self.p.discord.gateway
        gateway.wait_for(lambda g: bool(g.identifies) and g.connections >= 1, timeout=60)
        extra: dict[str, Any] = {}
        if guild is not None:
            bot = self.p.discord.bot_id
            text = f"<@{bot}> {text}"
            extra["mentions"] = [discord_user(bot, "switchboard") | {"bot": True}]
        author = discord_user(sender, f"p{sender[-4:]}")
        event = message_create(text, channel_id=channel, guild_id=guild, author=author, **extra)
        gateway.dispatch("MESSAGE_CREATE", event)

    def discord_texts(self, channel: str) -> list[str]:
        return [m.content for m in self.p.discord.messages_in(channel)]


def reply_in(texts: Any, label: str, what: str = "", timeout: float = WAIT_S) -> str:
    """The first sent text holding ``label``, waiting for it (``texts``: a callable)."""
    found: list[str] = wait_for(
        lambda: [t for t in texts() if label in t], timeout, what or f"the reply to {label}"
    )
    return found[0]


# --- the system's state -----------------------------------------------------------------------


def router_refused(services: ServiceProcesses, channel: str, reason: str) -> float:
    url = f"http://127.0.0.1:{services.ops_ports['router']}/metrics"
    text = httpx.get(url, timeout=5).text
    return metric(text, "sb_router_refused_total", channel=channel, reason=reason)


def transcript(services: ServiceProcesses, key: str) -> list[dict[str, Any]]:
    """A session's history through the gateway's sessions API (the operator's token); [] for
    a session that does not exist (yet)."""
    with client(services.url, services.token) as c:
        r = c.get(f"/api/sessions/{key}/history")
        if r.status_code == 404:
            return []
        assert r.status_code == 200, r.text
        return list(r.json()["messages"])


def settled(services: ServiceProcesses) -> None:
    """Until every inbound message so far is routed and every lane item answered."""
    settle(services.nats_url, timeout=WAIT_S)


def log_size(services: ServiceProcesses, name: str) -> int:
    path = services.home / "logs" / f"{name}.log"
    return path.stat().st_size if path.exists() else 0


def log_since(services: ServiceProcesses, name: str, offset: int) -> str:
    path = services.home / "logs" / f"{name}.log"
    with path.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def pause(seconds: float) -> None:
    """A short pause between polls (never a measured duration)."""
    time.sleep(seconds)
