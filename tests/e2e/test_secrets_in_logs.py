"""Credentials never reach a log: one system (``switchboard up --processes``, see
log_secrets.py) holding every kind of credential it can be given: channel tokens and webhook
secrets of Telegram, Slack and Discord, both model keys, the embedding and transcription keys,
the gateway, hooks and service tokens, hook mappings' token and signing secret, the NATS
password of every service user. Each test drives traffic through one entry point, the failures
included (a wrong token, a bad signature, the platform or the model answering 401 or 500, so
that errors are logged), then reads every log the system wrote (each service process's stdout
and stderr, nats-server's, PostgreSQL's, the launcher's output) for any secret, whole or its
first or last 12 characters; once more after the system stopped.

The negative control plants a made-up secret in each of those logs through the system's own
processes (printed at start by each Python process, a NATS login and a PostgreSQL login under
its name) and the same scan must find it in every one of them."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import nats
import pytest

from tests.e2e.helpers import client, wait_for
from tests.e2e.log_secrets import (
    FRAGMENT,
    LogSystem,
    Secret,
    assert_no_secret_logged,
    leaks,
    log_sources,
    log_system,
)
from tests.fakes.discord import FakeDiscord
from tests.fakes.discord_ws import message_create
from tests.lanes.pipeline import wait_settled
from tests.support.stack import admin_nats_url


@pytest.fixture(scope="module")
def system() -> Iterator[LogSystem]:
    # Outside pytest's temp tree: a pytest session started meanwhile (another worker, another
    # checkout) may delete older session folders, with this system's PostgreSQL in them.
    base = Path(tempfile.mkdtemp(prefix="sb-secrets-"))
    canary = "canary" + secrets.token_hex(24)
    try:
        with log_system(base / "home", base / "site", canary) as running:
            yield running
        assert_no_secret_logged(running)  # what the services logged while stopping, too
    finally:
        shutil.rmtree(base, ignore_errors=True)


def nats_url(system: LogSystem) -> str:
    """The stack's NATS as its services have it (from the gateway's environment)."""
    pid = system.stack.pids()["gateway-0"]
    environ = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(v.split("=", 1) for v in environ if "=" in v)["SB_NATS_URL"]


def settle(system: LogSystem, timeout: float = 90.0) -> None:
    """Until every message so far is routed and answered and OUTBOUND (a work queue) is
    empty: each reply part sent, retried to the end or dead-lettered."""

    async def run() -> None:
        nc = await nats.connect(admin_nats_url(system.home, nats_url(system)))
        try:
            js = nc.jetstream()
            await wait_settled(js, timeout)
            deadline = time.monotonic() + timeout
            while (await js.stream_info("OUTBOUND")).state.messages:
                assert time.monotonic() < deadline, "OUTBOUND never emptied"
                await asyncio.sleep(0.1)
        finally:
            await nc.close()

    asyncio.run(run())


def logged(system: LogSystem, source: str, *words: str) -> bool:
    """Whether one line of ``source`` (e.g. "logs/gateway-0.log") holds all ``words``."""
    text = log_sources(system).get(source, "")
    return any(all(w in line for w in words) for line in text.splitlines())


def test_telegram_traffic_and_its_failures_log_no_secret(system: LogSystem) -> None:
    tg, updates = system.telegram, system.updates
    url = system.stack.url + "/channels/telegram/default"
    assert [c.method for c in tg.calls][:2] == ["getMe", "setWebhook"]  # token and secret sent

    def post(user: int, secret: str | None = None) -> httpx.Response:
        body, headers = updates.webhook(updates.message("time?", user=updates.user(user)), secret)
        return httpx.post(url, content=body, headers=headers, timeout=30)

    assert post(4101).status_code == 200
    tg.wait_for_sent(1)
    assert post(4102, secret="wrong" + secrets.token_hex(8)).status_code in (401, 403)
    tg.fail_next("sendMessage", 401, "Unauthorized")  # Telegram refuses the bot token
    assert post(4103).status_code == 200
    wait_for(lambda: any(c.status == 401 for c in tg.attempts()), 60, "the refused reply")
    tg.fail_always("sendMessage", 500)  # and is down for every attempt
    assert post(4104).status_code == 200
    wait_for(lambda: len([c for c in tg.attempts() if c.status == 500]) >= 3, 90, "the 500s")
    tg.recover("sendMessage")
    settle(system)
    assert logged(system, "logs/gateway-0.log", "telegram", "401")
    assert_no_secret_logged(system)


def test_slack_traffic_and_its_failures_log_no_secret(system: LogSystem) -> None:
    slack, events = system.slack, system.events
    url = system.stack.url + "/channels/slack/default"

    def deliver(channel: str, sign: bool = True) -> httpx.Response:
        envelope = events.envelope(events.message(f"U{channel}", "time?", channel))
        body, headers = events.request(envelope)
        if not sign:
            headers["x-slack-signature"] = "v0=" + "0" * 64
        return httpx.post(url, content=body, headers=headers, timeout=30)

    assert deliver("D1").status_code == 200
    slack.wait_for_posts(1, timeout=60)
    assert deliver("D2", sign=False).status_code == 401
    slack.fail_next("invalid_auth")  # Slack refuses the bot token (HTTP 200, ok: false)
    assert deliver("D3").status_code == 200
    slack.fail_next("internal_error", status=500)
    assert deliver("D4").status_code == 200
    slack.wait_for_posts(2, timeout=90)
    settle(system)
    assert any(c.error == "invalid_auth" for c in slack.calls)
    assert logged(system, "logs/gateway-0.log", "slack refused", "invalid_auth")
    assert_no_secret_logged(system)


def test_discord_traffic_and_its_failures_log_no_secret(system: LogSystem) -> None:
    discord = system.discord
    endpoint = system.stack.url + "/channels/discord/default"
    command = discord.interactions.slash_command("time?", channel_id="4500")
    # The interaction's token is a credential (its webhooks' URL holds it) for 15 minutes.
    system.add_secret("a Discord interaction token", command["token"].split("_", 1)[1])
    answer = discord.send_interaction(endpoint, command)
    assert answer.status_code == 200 and answer.json() == {"type": 5}, answer.text

    def edited(d: FakeDiscord) -> bool:
        original = d.interaction(command["token"]).original
        return original is not None and original.edits > 0

    discord.wait_for(edited, timeout=60)

    body, headers = discord.interactions.request(command)
    headers["x-signature-ed25519"] = "00" * 64
    assert httpx.post(endpoint, content=body, headers=headers, timeout=30).status_code == 401

    # DMs over the gateway connection, answered with the bot token: a 401, then a 500.
    discord.gateway.wait_for(lambda g: len(g.identifies) >= 1)
    discord.fail_next(401, route="channel")
    discord.gateway.dispatch("MESSAGE_CREATE", message_create("time?", channel_id="4601"))
    discord.wait_for(lambda d: any(c.status == 401 for c in d.calls), timeout=60)
    discord.fail_next(500, route="channel")
    discord.gateway.dispatch("MESSAGE_CREATE", message_create("date?", channel_id="4602"))
    discord.wait_for(lambda d: d.messages_in("4602"), timeout=90)
    settle(system)
    assert logged(system, "logs/gateway-0.log", "Discord refused", "401")
    assert_no_secret_logged(system)


def test_api_and_model_calls_and_their_failures_log_no_secret(system: LogSystem) -> None:
    """The OpenAI-compatible API and the tools API with the gateway token, a wrong token; the
    model over OpenAI's wire and Anthropic's (a session switched to it), each failing once;
    the memory service's embeddings, working and then down."""
    llm, url = system.llm, system.stack.url
    wrong = "Bearer " + secrets.token_urlsafe(32)  # a mistyped token is a credential too
    system.add_secret("a refused bearer token", wrong.removeprefix("Bearer "))

    def chat(user: str) -> httpx.Response:
        body = {
            "model": "switchboard",
            "user": user,
            "messages": [{"role": "user", "content": "hi"}],
        }
        with client(url, system.stack.token) as c:
            return c.post("/v1/chat/completions", json=body, timeout=120)

    assert chat("logs-openai").status_code == 200
    refused = httpx.post(f"{url}/v1/chat/completions", json={}, headers={"Authorization": wrong})
    assert refused.status_code == 401
    with client(url, system.stack.token) as c:
        tool = c.post("/tools/invoke", json={"tool": "get_time", "args": {}}, timeout=60)
        assert tool.status_code == 200, tool.text
        key = "main:openai:logs-anthropic"
        assert chat("logs-anthropic").status_code == 200
        patched = c.patch(f"/api/sessions/{key}", json={"model": "anthropic:claude-sonnet-4-5"})
        assert patched.status_code == 200, patched.text
    assert chat("logs-anthropic").status_code == 200
    assert llm.calls[-1].provider == "anthropic"

    wait_for(lambda: system.embeddings.requests, 60, "the memory service's first embedding")
    system.embeddings.down = True  # 503s: the memory service logs and retries later
    llm.fail_next(500, provider="openai")
    chat("logs-openai")
    llm.fail_next(401, provider="anthropic")
    chat("logs-anthropic")
    wait_for(lambda: sum(c.status == 401 for c in llm.calls) == 1, 60, "the refused model call")
    wait_for(lambda: logged(system, "logs/memory-0.log", "503"), 90, "the embedding failure")
    system.embeddings.down = False
    assert any(c.status == 500 and c.provider == "openai" for c in llm.calls)
    assert logged(system, "logs/gateway-0.log", "POST /v1/chat/completions 401")
    assert_no_secret_logged(system)


def test_hooks_and_their_refusals_log_no_secret(system: LogSystem) -> None:
    url = system.stack.url
    hooks = next(s.value for s in system.secrets if s.name == "SB_HOOKS_TOKEN")

    def bearer(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    wake = {"text": "The nightly build finished."}
    assert httpx.post(f"{url}/hooks/wake", json=wake, headers=bearer(hooks)).status_code == 202
    ticket = {"id": 7}
    r = httpx.post(f"{url}/hooks/ticket", json=ticket, headers=bearer(system.hook_token))
    assert r.status_code == 202, r.text
    push = json.dumps({"ref": "refs/heads/main"}).encode()
    digest = hmac.new(system.hook_signing_secret.encode(), push, hashlib.sha256).hexdigest()
    signed = {"x-hub-signature-256": f"sha256={digest}", "content-type": "application/json"}
    assert httpx.post(f"{url}/hooks/signed", content=push, headers=signed).status_code == 202

    # Refused: the gateway's token, a bad signature, the mapping's token in the query string.
    gateway = bearer(system.stack.token)
    assert httpx.post(f"{url}/hooks/wake", json=wake, headers=gateway).status_code == 401
    bad = {**signed, "x-hub-signature-256": "sha256=" + "0" * 64}
    assert httpx.post(f"{url}/hooks/signed", content=push, headers=bad).status_code == 401
    query = httpx.post(f"{url}/hooks/ticket?token={system.hook_token}", json=ticket)
    assert query.status_code == 400, query.text
    settle(system)
    # The gateway logs each request's method, path and status: the query string is left out.
    assert logged(system, "logs/gateway-0.log", "POST /hooks/ticket 400")
    assert_no_secret_logged(system)


def test_the_scan_finds_a_secret_planted_in_every_log(system: LogSystem) -> None:
    """The negative control: a made-up secret that each Python process of the system printed
    at start (launcher and every service: their stdout/stderr), nats-server logged as the user
    of a refused login (its first 30 characters only: a prefix is found too) and PostgreSQL
    as an unknown role; the scan reports it in every source it reads."""
    [canary] = system.canaries
    prefix = canary.value[: len("canary") + FRAGMENT + 6]

    async def refused_logins() -> None:
        with pytest.raises(Exception):  # noqa: B017 (nats-py raises several types)
            await nats.connect(
                nats_url(system),
                user=prefix,
                password="wrong",
                allow_reconnect=False,
                max_reconnect_attempts=0,
                connect_timeout=5,
            )
        # postmaster.pid: pid, data dir, start time, port, socket directory...
        postmaster = (system.home / "pg" / "postmaster.pid").read_text().splitlines()
        with pytest.raises(asyncpg.InvalidAuthorizationSpecificationError):
            await asyncpg.connect(
                host=postmaster[4], port=int(postmaster[3]), user=canary.value, database="postgres"
            )

    asyncio.run(refused_logins())
    wait_for(lambda: logged(system, "logs/nats.log", prefix), 30, "nats-server's log line")
    wait_for(lambda: logged(system, "pg/log", canary.value), 30, "PostgreSQL's log line")

    sources = log_sources(system)
    found = leaks(sources, [Secret("canary", canary.value, "canary")])
    where = {line.split(" in ", 1)[1].split(" line ", 1)[0] for line in found}
    assert where == set(sources), sorted(set(sources) - where)
    assert {f"logs/{name}.log" for name in system.stack.pids() if "-" in name} <= where
