"""Chat channels (``channels`` in latest.json): per channel, the time from a signed webhook POST
to the reply arriving at the fake platform, next to a turn through the OpenAI API on the same
stack (``added_ms_p50``: the channel's p50 minus the API's), and the webhooks/s one gateway
accepts.

- latency: ``plan.channel_turns`` messages one after another, each a DM from a new sender (a
  fresh session), the instant fake model answering with one tool call then text, as the
  OpenAI-path turns do; a reply counts when the fake platform has received it.
- accepted webhooks/s: ``plan.channel_burst`` distinct webhooks from ``IN_FLIGHT`` concurrent
  clients against a second stack whose DM policy is ``allowlist`` (the router refuses them at
  once, so no run competes with the gateway for the two cores): what the gateway takes in.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol

import httpx

from tests.bench import http_burst, load, procs
from tests.bench.run import Plan, Say, fresh_home
from tests.bench.stats import summarize
from tests.support.stack import Stack

IN_FLIGHT = 32
BURST_ARGS = ("--processes",)
TARGET_ADDED_MS = 20.0
TARGET_ACCEPTED_PER_S = 500.0


class Driver(Protocol):
    """One chat platform's fake and how to talk to the gateway as that platform."""

    name: str

    def env(self) -> dict[str, str]:
        """The gateway's settings for the channel, pointing at the fake."""
        ...

    def webhook(self, i: int, tag: str) -> tuple[str, bytes, dict[str, str]]:
        """A signed webhook for message ``i`` (a DM from its own sender): path, body, headers."""
        ...

    def accepted(self, body: dict[str, Any]) -> None:
        """The gateway's answer to a latency webhook (Discord needs it: the deferral)."""
        ...

    def wait_replies(self, n: int, timeout: float) -> None:
        """Block until the fake has received ``n`` replies in all."""
        ...


def _poll(count: Callable[[], int], n: int, timeout: float) -> None:
    """For fakes without a condition to wait on: check every millisecond."""
    deadline = time.monotonic() + timeout
    while count() < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count()} replies, expected {n}")
        time.sleep(0.001)


@contextmanager
def _slack() -> Iterator[Driver]:
    from tests.fakes.slack import FakeSlack, SlackEvents

    class SlackDriver:
        name = "slack"

        def __init__(self, fake: FakeSlack, events: SlackEvents) -> None:
            self.fake, self.events = fake, events

        def env(self) -> dict[str, str]:
            return {
                "SB_SLACK_BOT_TOKEN": self.fake.token,
                "SB_SLACK_SIGNING_SECRET": self.events.secret,
                "SB_SLACK_API_BASE": self.fake.base_url,
            }

        def webhook(self, i: int, tag: str) -> tuple[str, bytes, dict[str, str]]:
            event = self.events.message(f"U{tag}{i}", f"hello {i}", f"D{tag}{i}")
            body, headers = self.events.request(self.events.envelope(event))
            return "/channels/slack/default", body, headers

        def accepted(self, body: dict[str, Any]) -> None:
            pass

        def wait_replies(self, n: int, timeout: float) -> None:
            self.fake.wait_for_posts(n, timeout)

    with FakeSlack() as fake:
        yield SlackDriver(fake, SlackEvents())


@contextmanager
def _telegram() -> Iterator[Driver]:
    from tests.fakes.telegram import FakeTelegram
    from tests.fakes.telegram_objects import TelegramUpdates

    secret = secrets.token_urlsafe(32)

    class TelegramDriver:
        name = "telegram"

        def __init__(self, fake: FakeTelegram) -> None:
            self.fake = fake
            self.updates = TelegramUpdates(secret, bot_username=fake.username, bot_id=fake.bot_id)

        def env(self) -> dict[str, str]:
            return {
                "SB_TELEGRAM_BOT_TOKEN": self.fake.token,
                "SB_TELEGRAM_WEBHOOK_SECRET": secret,
                "SB_TELEGRAM_API_BASE": self.fake.base_url,
            }

        def webhook(self, i: int, tag: str) -> tuple[str, bytes, dict[str, str]]:
            user = self.updates.user(10_000_000 + i + (0 if tag == "lat" else 5_000_000))
            body, headers = self.updates.webhook(self.updates.message(f"hello {i}", user=user))
            return "/channels/telegram/default", body, headers

        def accepted(self, body: dict[str, Any]) -> None:
            pass

        def wait_replies(self, n: int, timeout: float) -> None:
            _poll(lambda: len(self.fake.sent), n, timeout)

    with FakeTelegram() as fake:
        yield TelegramDriver(fake)


@contextmanager
def _discord() -> Iterator[Driver]:
    from tests.fakes.discord import FakeDiscord

    class DiscordDriver:
        name = "discord"

        def __init__(self, fake: FakeDiscord) -> None:
            self.fake = fake
            self.tokens: list[str] = []

        def env(self) -> dict[str, str]:
            return {
                "SB_DISCORD_BOT_TOKEN": self.fake.token,
                "SB_DISCORD_PUBLIC_KEY": self.fake.interactions.public_key,
                "SB_DISCORD_APPLICATION_ID": self.fake.interactions.application_id,
                "SB_DISCORD_API_BASE": self.fake.base_url,
            }

        def webhook(self, i: int, tag: str) -> tuple[str, bytes, dict[str, str]]:
            # a slash command in a DM with the bot, from its own user and channel
            uid = str(4_100_000_000_000_000_000 + i + (0 if tag == "lat" else 500_000))
            command = self.fake.interactions.slash_command(
                f"hello {i}", user_id=uid, channel_id=str(int(uid) + 1)
            )
            self.tokens.append(command["token"])
            body, headers = self.fake.interactions.request(command)
            return "/channels/discord/default", body, headers

        def accepted(self, body: dict[str, Any]) -> None:
            self.fake.record_response(self.tokens[-1], body)

        def wait_replies(self, n: int, timeout: float) -> None:
            def edited() -> int:
                return sum(
                    1
                    for t in self.tokens
                    if (o := self.fake.interaction(t).original) is not None and o.edits
                )

            self.fake.wait_for(lambda _: edited() >= n, timeout)

    with FakeDiscord() as fake:
        yield DiscordDriver(fake)


DRIVERS = {"telegram": _telegram, "slack": _slack, "discord": _discord}


def bench_channels(plan: Plan, fake_model: procs.FakeModel, say: Say) -> dict[str, Any]:
    """Every channel of :data:`DRIVERS`; a channel that fails keeps its error."""
    out: dict[str, Any] = {}
    with ExitStack() as fakes:
        drivers = [fakes.enter_context(make()) for make in DRIVERS.values()]
        env: dict[str, str] = {"SB_DM_POLICY": "open", "SB_RATE_LIMIT_PER_MINUTE": "0"}
        for d in drivers:
            env.update(d.env())
        with fresh_home() as home:
            stack = procs.launch_stack(home, fake_model, extra_env=env)
            try:
                api = load.sequential_turns(stack, plan.channel_turns, "chan-api")
                api_ms = summarize(api.ok_ms)
                out["openai_turn_ms"] = api_ms
                say(f"[channels] OpenAI path p50 {api_ms['p50']:.1f} ms")
                for d in drivers:
                    out[d.name] = entry = {}
                    try:
                        entry.update(_latency(stack, d, plan.channel_turns))
                        entry["added_ms_p50"] = round(entry["reply_ms"]["p50"] - api_ms["p50"], 3)
                        say(f"[channels] {d.name}: reply p50 {entry['reply_ms']['p50']:.1f} ms")
                    except Exception as exc:  # recorded: the other channels are measured
                        entry["error"] = repr(exc)[:500]
                        say(f"[channels] {d.name} failed: {exc!r}")
            finally:
                procs.shutdown_stack(stack)
        env["SB_DM_POLICY"] = "allowlist"  # every webhook accepted, none run
        with fresh_home() as home:
            # one process per service: the gateway's own process is what is measured
            stack = procs.launch_stack(home, fake_model, BURST_ARGS, extra_env=env)
            try:
                for d in drivers:
                    entry = out.setdefault(d.name, {})
                    try:
                        rate = asyncio.run(_accepted_per_s(stack, d, plan.channel_burst))
                        entry["accepted_per_s"] = rate
                        say(f"[channels] {d.name}: {rate:.0f} webhooks/s accepted")
                    except Exception as exc:
                        entry["burst_error"] = repr(exc)[:500]
                        say(f"[channels] {d.name} burst failed: {exc!r}")
            finally:
                procs.shutdown_stack(stack)
    out["targets"] = {
        "added_ms_p50": TARGET_ADDED_MS,
        "accepted_per_s": TARGET_ACCEPTED_PER_S,
    }
    return out


def _latency(stack: Stack, driver: Driver, n: int, warmup: int = 3) -> dict[str, Any]:
    times: list[float] = []
    with httpx.Client(base_url=stack.url, timeout=30.0, trust_env=False) as client:
        for i in range(warmup + n):
            path, body, headers = driver.webhook(i, "lat")
            start = time.perf_counter()
            response = client.post(path, content=body, headers=headers)
            if response.status_code != 200:
                raise RuntimeError(f"webhook {i}: {response.status_code} {response.text[:200]}")
            driver.accepted(response.json())
            driver.wait_replies(i + 1, timeout=60.0)
            if i >= warmup:
                times.append((time.perf_counter() - start) * 1000)
    return {"reply_ms": summarize(times)}


async def _accepted_per_s(stack: Stack, driver: Driver, n: int) -> float:
    calls = [driver.webhook(i, "burst") for i in range(n)]  # signed before the clock starts
    elapsed, refused = await http_burst.burst("127.0.0.1", stack.http_port, calls, IN_FLIGHT)
    if refused:
        raise RuntimeError(f"{len(refused)} webhooks refused, e.g. {refused[:3]}")
    return round(n / elapsed, 1)


def targets(channels: dict[str, Any]) -> list[dict[str, Any]]:
    """Per channel: the added p50 and the accepted webhooks/s against the issue's targets."""
    rows: list[dict[str, Any]] = []
    for name, entry in channels.items():
        if name in ("openai_turn_ms", "targets") or not isinstance(entry, dict):
            continue
        added = entry.get("added_ms_p50")
        rows.append(
            {
                "figure": f"{name}: webhook -> delivered reply, added over the OpenAI path (p50)",
                "target": f"<= {TARGET_ADDED_MS:g} ms",
                "measured": "-" if added is None else f"{added:.1f} ms",
                "verdict": "n/a"
                if added is None
                else ("PASS" if added <= TARGET_ADDED_MS else "MISS"),
            }
        )
        rate = entry.get("accepted_per_s")
        rows.append(
            {
                "figure": f"{name}: webhooks accepted per second, one gateway",
                "target": f">= {TARGET_ACCEPTED_PER_S:g}",
                "measured": "-" if rate is None else f"{rate:.0f}",
                "verdict": "n/a"
                if rate is None
                else ("PASS" if rate >= TARGET_ACCEPTED_PER_S else "MISS"),
            }
        )
    return rows


def markdown(channels: dict[str, Any]) -> list[str]:
    api = channels.get("openai_turn_ms", {})
    lines = [
        "",
        "## Channels: webhook to delivered reply",
        "",
        "Sequential messages, each a DM from a new sender, one tool call then text; the reply "
        "counted when the fake platform received it. Accepted/s: distinct signed webhooks from "
        f"{IN_FLIGHT} concurrent clients on a stack whose router refuses them (no runs). "
        f"OpenAI path on the same stack: p50 {api.get('p50', float('nan')):.1f} ms, "
        f"p99 {api.get('p99', float('nan')):.1f} ms.",
        "",
        "| channel | reply p50 (ms) | reply p99 (ms) | added p50 (ms) | accepted/s | error |",
        "|---|---|---|---|---|---|",
    ]
    for name, e in channels.items():
        if name in ("openai_turn_ms", "targets") or not isinstance(e, dict):
            continue
        reply = e.get("reply_ms", {})
        lines.append(
            f"| {name} | {reply.get('p50', '-')} | {reply.get('p99', '-')} | "
            f"{e.get('added_ms_p50', '-')} | {e.get('accepted_per_s', '-')} | "
            f"{(e.get('error') or e.get('burst_error') or '')[:80]} |"
        )
    return lines
