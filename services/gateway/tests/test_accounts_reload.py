"""Channel accounts change without a restart (issue 27, part 5): a running gateway (in-process,
real nats-server, the real delivery consumer) is handed new settings the way a changed
configuration file hands them (``switchboard.reloads.apply``), against the fake platforms, one
per bot, workspace or application so each answers only its own token.

Added: its webhook answers and reaches INBOUND (the router's input), a reply goes out through
it; polling or the Discord gateway connection starts under its lease. Removed: its webhook is
404, its poller or socket stops and its lease is released, a reply still in flight for it is
dead-lettered. Changed: the new secret opens the webhook, the old one no longer does. Untouched
accounts keep their adapter (the same object, never started twice). A token the platform
refuses leaves that account out and the others serving."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path

import pytest

from switchboard_gateway.channels.telegram import TelegramAdapter
from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_events import SlackEvents
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.fakes.telegram_updates import FakeTelegramUpdates

from .accounts_reload_harness import Live, eventually, inbound_of, lease_value, live_gateway

TOKEN_HOME = "7000000031:AAH-fake_telegram_token-home0123456789abcd"
TOKEN_WORK = "7000000032:AAH-fake_telegram_token-work0123456789abcd"
TOKEN_WORK_2 = "7000000033:AAH-fake_telegram_token-work2123456789abc"
TOKEN_POLL = "7000000034:AAH-fake_telegram_token-poll0123456789abcd"
TOKEN_POLL_2 = "7000000035:AAH-fake_telegram_token-poll2123456789abc"
DISCORD_CHANNEL = "4200000000000000042"


def secret() -> str:
    return f"tg-webhook-{uuid.uuid4().hex}"


async def post_update(gw: Live, account: str, updates: TelegramUpdates, text: str) -> int:
    body, headers = updates.webhook(updates.message(text))
    return (await gw.post(f"/channels/telegram/{account}", body, headers)).status_code


async def test_a_telegram_bot_added_changed_and_removed_while_the_gateway_runs(
    nats_url: str, tmp_path: Path
) -> None:
    """From one bot (``default``) to two and back: the named one added, its secret and token
    changed, then removed, while ``default`` keeps its adapter and answers throughout."""
    home_secret, work_secret, new_secret = secret(), secret(), secret()
    with (
        FakeTelegram(TOKEN_HOME, "home_bot") as home,
        FakeTelegram(TOKEN_WORK, "work_bot") as work,
        FakeTelegram(TOKEN_WORK_2, "work2_bot") as work2,
    ):
        to_home = TelegramUpdates(home_secret, bot_username=home.username, bot_id=home.bot_id)
        to_work = TelegramUpdates(work_secret, bot_username=work.username, bot_id=work.bot_id)
        to_work2 = TelegramUpdates(new_secret, bot_username=work2.username, bot_id=work2.bot_id)
        async with live_gateway(
            nats_url,
            tmp_path,
            telegram_bot_token=TOKEN_HOME,
            telegram_webhook_secret=home_secret,
            telegram_api_base=home.base_url,
        ) as gw:
            channel = gw.channel("telegram")
            default = channel.adapters["default"]
            assert await post_update(gw, "work", to_work, "too early") == 404

            # Added: one account becomes two.
            work_account = {"bot_token": TOKEN_WORK, "webhook_secret": work_secret}
            work_account["api_base"] = work.base_url
            await gw.change(telegram_accounts={"work": work_account})
            assert channel.accounts == ("default", "work")
            assert await post_update(gw, "work", to_work, "hello work") == 200
            [message] = await inbound_of(gw, "work")
            assert message.text == "hello work"
            await gw.reply(message, "answer from work")
            [sent] = await asyncio.to_thread(work.wait_for_sent, 1, 30.0)
            assert sent.text == "answer from work" and home.sent == []

            # Changed: another secret and another bot under the same name.
            changed = {"bot_token": TOKEN_WORK_2, "webhook_secret": new_secret}
            changed["api_base"] = work2.base_url
            await gw.change(telegram_accounts={"work": changed})
            assert await post_update(gw, "work", to_work, "old secret") == 401
            assert await post_update(gw, "work", to_work2, "new secret") == 200
            [_, message] = await inbound_of(gw, "work", 2)
            await gw.reply(message, "answer from the new bot")
            [sent] = await asyncio.to_thread(work2.wait_for_sent, 1, 30.0)
            assert sent.text == "answer from the new bot" and len(work.sent) == 1

            # Removed: two accounts become one again; a reply still meant for it is
            # dead-lettered with the reason.
            await gw.change(telegram_accounts=None)
            assert channel.accounts == ("default",)
            assert await post_update(gw, "work", to_work2, "gone") == 404
            await gw.reply(message, "too late")
            [letter] = await eventually("a dead letter", gw.dead_letters)
            assert "no telegram account 'work'" in letter.reason
            assert letter.part.text == "too late" and len(work2.sent) == 1

            # default answered throughout, with the adapter it started with, started once.
            assert channel.adapters["default"] is default
            assert len(home.attempts("getMe")) == 1
            assert await post_update(gw, "default", to_home, "still here") == 200
            [message] = await inbound_of(gw, "default")
            await gw.reply(message, "answer from home")
            [sent] = await asyncio.to_thread(home.wait_for_sent, 1, 30.0)
            assert sent.text == "answer from home"


async def test_a_polling_bot_added_removed_and_added_again(nats_url: str, tmp_path: Path) -> None:
    """Polling starts under the account's lease when it is added and stops, releasing the
    lease, when it is removed; added again, it polls on from the stored offset: nothing
    published twice, nothing lost, never two pollers (no 409 conflict)."""
    with (
        FakeTelegram(TOKEN_HOME, "home_bot") as home,
        FakeTelegramUpdates(TOKEN_POLL, bot_id=7000000034) as family,
    ):
        async with live_gateway(
            nats_url,
            tmp_path,
            telegram_bot_token=TOKEN_HOME,
            telegram_webhook_secret=secret(),
            telegram_api_base=home.base_url,
        ) as gw:
            polling = {"bot_token": TOKEN_POLL, "mode": "polling", "api_base": family.base_url}
            await gw.change(telegram_accounts={"family": polling})
            assert await eventually("the lease", lambda: lease_value(gw, "telegram.family"))
            family.push_message("first")
            [message] = await inbound_of(gw, "family")
            assert message.text == "first"
            adapter = gw.channel("telegram").adapters["family"]
            assert isinstance(adapter, TelegramAdapter)

            await gw.change(telegram_accounts=None)
            assert gw.channel("telegram").accounts == ("default",)
            assert await lease_value(gw, "telegram.family") is None  # released, not expired
            assert adapter._polling is None  # closed: its poller stopped

            family.push_message("while away")
            await gw.change(telegram_accounts={"family": polling})
            messages = await inbound_of(gw, "family", 2)
            assert [m.text for m in messages] == ["first", "while away"]
            family.push_message("back")
            messages = await inbound_of(gw, "family", 3)
            assert [m.text for m in messages] == ["first", "while away", "back"]
            assert family.conflicts == 0


async def test_a_polling_account_given_another_bot_polls_it_from_its_start(
    nats_url: str, tmp_path: Path
) -> None:
    """Update ids are per bot: the offset the old bot's poller stored (past 700000003) would
    confirm, so drop, the new bot's update 700000001. The old poller is stopped before the new
    one starts (one poller per account), and the new one does not take the old bot's offset."""
    with (
        FakeTelegramUpdates(TOKEN_POLL, bot_id=7000000034) as old,
        FakeTelegramUpdates(TOKEN_POLL_2, bot_id=7000000035) as new,
    ):
        polling = {"bot_token": TOKEN_POLL, "mode": "polling", "api_base": old.base_url}
        async with live_gateway(
            nats_url, tmp_path, telegram_accounts=json.dumps({"family": polling})
        ) as gw:
            for text in ("one", "two", "three"):
                old.push_message(text)
            await inbound_of(gw, "family", 3)
            stored = await eventually(
                "the stored offset", lambda: lease_value(gw, "telegram.family.offset")
            )
            assert stored.startswith(b"700000004")
            # (Another chat: the first message of each bot in one chat has the same id.)
            new.push_message("to the new bot", user_id=4343)

            changed = {"bot_token": TOKEN_POLL_2, "mode": "polling", "api_base": new.base_url}
            await gw.change(telegram_accounts={"family": changed})
            messages = await inbound_of(gw, "family", 4)
            assert messages[-1].text == "to the new bot"
            assert old.conflicts == 0 and new.conflicts == 0


async def test_a_bot_whose_token_telegram_refuses_is_left_out(
    nats_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The new account is logged and absent (its webhook 404), not half-started; the bot
    already served keeps answering."""
    home_secret = secret()
    with (
        FakeTelegram(TOKEN_HOME, "home_bot") as home,
        FakeTelegram(TOKEN_WORK, "work_bot") as other,  # answers its own token only
    ):
        to_home = TelegramUpdates(home_secret, bot_username=home.username, bot_id=home.bot_id)
        async with live_gateway(
            nats_url,
            tmp_path,
            telegram_bot_token=TOKEN_HOME,
            telegram_webhook_secret=home_secret,
            telegram_api_base=home.base_url,
        ) as gw:
            refused = {"bot_token": TOKEN_WORK_2, "webhook_secret": secret()}
            refused["api_base"] = other.base_url
            with caplog.at_level(logging.ERROR):
                await gw.change(telegram_accounts={"work": refused})
            assert "telegram account 'work' not started: Telegram refused" in caplog.text
            assert TOKEN_WORK_2 not in caplog.text and TOKEN_WORK_2.split(":")[1] not in caplog.text
            assert gw.channel("telegram").accounts == ("default",)
            assert gw.live._specs["telegram"].keys() == {"default"}  # tried again next change
            body, headers = to_home.webhook(to_home.message("for work"))
            assert (await gw.post("/channels/telegram/work", body, headers)).status_code == 404
            assert await post_update(gw, "default", to_home, "hello") == 200
            [message] = await inbound_of(gw, "default")
            await gw.reply(message, "still answering")
            [sent] = await asyncio.to_thread(home.wait_for_sent, 1, 30.0)
            assert sent.text == "still answering"


async def test_slack_added_to_a_gateway_that_served_no_channel_and_removed(
    nats_url: str, tmp_path: Path
) -> None:
    """The first channel a reload serves gets the webhook route and a delivery consumer."""
    events = SlackEvents(team_id="T0AAA")
    with FakeSlack(team_id="T0AAA") as slack:
        async with live_gateway(nats_url, tmp_path) as gw:
            body, headers = events.request(events.envelope(events.message("U0A", "hi", "D0A")))
            assert (await gw.post("/channels/slack/acme", body, headers)).status_code == 404
            account = {"bot_token": slack.token, "signing_secret": events.secret}
            account["api_base"] = slack.base_url
            await gw.change(slack_accounts={"acme": account})
            response = await gw.post("/channels/slack/acme", body, headers)
            assert response.status_code == 200, response.text
            [message] = await inbound_of(gw, "acme")
            await gw.reply(message, "hello acme")
            [post] = await asyncio.to_thread(slack.wait_for_posts, 1, 30.0)
            assert (post.channel, post.text) == ("D0A", "hello acme")

            await gw.change(slack_accounts=None)
            body, headers = events.request(events.envelope(events.message("U0A", "2", "D0A")))
            response = await gw.post("/channels/slack/acme", body, headers)
            assert response.status_code == 404, response.text
            assert response.json()["error"]["code"] == "unknown_account"


async def test_a_discord_application_removed_closes_its_gateway_socket(
    nats_url: str, tmp_path: Path
) -> None:
    with FakeDiscord() as discord:
        app = {
            "bot_token": discord.token,
            "public_key": discord.interactions.public_key,
            "application_id": discord.interactions.application_id,
            "api_base": discord.base_url,
            "gateway": True,
        }
        async with live_gateway(nats_url, tmp_path) as gw:
            await gw.change(discord_accounts={"first": app})
            await asyncio.to_thread(discord.gateway.wait_for, lambda g: bool(g.identifies), 30.0)
            assert await lease_value(gw, "discord.first") is not None

            await gw.change(discord_accounts=None)
            assert gw.channel("discord").accounts == ()
            await asyncio.to_thread(discord.gateway.wait_for, lambda g: g._live is None, 30.0)
            assert await lease_value(gw, "discord.first") is None
            await gw.reply_to("first", "discord", DISCORD_CHANNEL, "after removal")
            [letter] = await eventually("a dead letter", gw.dead_letters)
            assert "no discord account 'first'" in letter.reason
            assert discord.messages_in(DISCORD_CHANNEL) == []
