"""Several accounts per channel (issue 27): the gateway (in-process, on a real nats-server, with
the real delivery consumer) serving two Telegram bots and two Slack workspaces against the fake
platforms, one fake per bot or workspace so each only answers its own token. A webhook is
verified with its own account's secret, its message published under that account, and the reply
part for it sent through that account's bot only; an unknown account is 404. The agent's side
is a reply part published on OUTBOUND as the agent publishes it (channel, account and chat taken
from the inbound message), the same seam test_delivery.py drives."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from switchboard.configfile.load import load
from switchboard.errors import ConfigError
from switchboard_gateway.channels import configured_adapters
from switchboard_gateway.channels.accounts import Accounts
from switchboard_gateway.channels.telegram import TelegramAdapter
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_events import SlackEvents
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates

from .accounts_harness import eventually_inbound, secret, serving, settings_for

TOKEN_DEFAULT = "7000000021:AAH-fake_telegram_token-default0123456789"
TOKEN_WORK = "7000000022:AAH-fake_telegram_token-work0123456789abcd"


# --- Telegram ---------------------------------------------------------------------------------


@pytest.fixture
def bots() -> Iterator[tuple[FakeTelegram, FakeTelegram]]:
    with (
        FakeTelegram(TOKEN_DEFAULT, "home_bot") as home,
        FakeTelegram(TOKEN_WORK, "work_bot") as work,
    ):
        yield home, work


async def test_two_telegram_bots_each_receive_and_answer_with_their_own_token(
    nats_url: str, tmp_path: Path, bots: tuple[FakeTelegram, FakeTelegram]
) -> None:
    """The single-bot settings (``default``) and a named account, both served; the same person
    writes to both bots, so both chats have the same id: only the account tells them apart."""
    home, work = bots
    home_secret, work_secret = secret(), secret()
    accounts = {
        "work": {"bot_token": TOKEN_WORK, "webhook_secret": work_secret, "api_base": work.base_url}
    }
    async with serving(
        nats_url,
        tmp_path,
        telegram_bot_token=TOKEN_DEFAULT,
        telegram_webhook_secret=home_secret,
        telegram_api_base=home.base_url,
        telegram_accounts=accounts,
    ) as gw:
        channel = gw.adapters["telegram"]
        assert isinstance(channel, Accounts) and set(channel.accounts) == {"default", "work"}
        to_home = TelegramUpdates(home_secret, bot_username=home.username, bot_id=home.bot_id)
        to_work = TelegramUpdates(work_secret, bot_username=work.username, bot_id=work.bot_id)

        body, headers = to_work.webhook(to_work.message("for work", message_id=5))
        wrong = await gw.client.post("/channels/telegram/default", content=body, headers=headers)
        assert wrong.status_code == 401, wrong.text  # work's secret does not open default's
        unknown = await gw.client.post("/channels/telegram/play", content=body, headers=headers)
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["error"]["code"] == "unknown_account"
        response = await gw.client.post("/channels/telegram/work", content=body, headers=headers)
        assert response.status_code == 200, response.text
        body, headers = to_home.webhook(to_home.message("for home", message_id=5))
        response = await gw.client.post("/channels/telegram/default", content=body, headers=headers)
        assert response.status_code == 200, response.text

        messages = await eventually_inbound(gw, 2)
        by_account = {m.account: m for m in messages}
        assert len(messages) == 2 and set(by_account) == {"default", "work"}
        assert by_account["work"].text == "for work" and by_account["default"].text == "for home"
        assert by_account["work"].chat.id == by_account["default"].chat.id  # the same person
        # Equal platform ids too, yet both stored: INBOUND's dedup id holds the account.
        assert by_account["work"].message_id == by_account["default"].message_id

        await gw.reply(by_account["work"], "answer from work")
        [sent] = await asyncio.to_thread(work.wait_for_sent, 1, 15.0)
        assert (sent.text, sent.chat_id) == ("answer from work", int(by_account["work"].chat.id))
        await gw.reply(by_account["default"], "answer from home")
        [sent] = await asyncio.to_thread(home.wait_for_sent, 1, 15.0)
        assert sent.text == "answer from home"
        assert [s.text for s in work.sent] == ["answer from work"]  # nothing of home's

        await channel.typing("work", by_account["work"].chat, "")
        assert [a[1] for a in work.actions] == ["typing"] and home.actions == []


def test_named_accounts_alone_from_the_environment(tmp_path: Path) -> None:
    """SB_TELEGRAM_ACCOUNTS as JSON in the environment, without the single-bot settings."""
    environ = {
        "SB_TELEGRAM_ACCOUNTS": json.dumps(
            {
                "home": {"bot_token": TOKEN_DEFAULT, "mode": "polling"},
                "work": {"bot_token": TOKEN_WORK, "webhook_secret": secret()},
            }
        )
    }
    channel = configured_adapters(settings_for(tmp_path, environ))["telegram"]
    assert isinstance(channel, Accounts) and channel.accounts == ("home", "work")
    home = channel.adapters["home"]
    assert isinstance(home, TelegramAdapter) and (home.account, home.mode) == ("home", "polling")
    assert TOKEN_DEFAULT not in repr(channel) and TOKEN_WORK not in repr(channel)


def test_only_the_single_bot_settings_serve_one_default_adapter(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path, telegram_bot_token=TOKEN_DEFAULT, telegram_webhook_secret=secret()
    )
    adapter = configured_adapters(settings)["telegram"]
    assert isinstance(adapter, TelegramAdapter) and adapter.accounts == ("default",)


@pytest.mark.parametrize(
    ("values", "error", "message"),
    [
        (  # default twice: neither silently wins
            {
                "telegram_bot_token": TOKEN_DEFAULT,
                "telegram_webhook_secret": secret(),
                "telegram_accounts": {"default": {"bot_token": TOKEN_WORK, "mode": "polling"}},
            },
            ValidationError,
            "SB_TELEGRAM_ACCOUNTS names the account 'default'",
        ),
        (
            {"telegram_accounts": {"a/b": {"bot_token": TOKEN_WORK, "mode": "polling"}}},
            ValidationError,
            "may hold only",
        ),
        (  # one bot under two names would poll against itself
            {
                "telegram_accounts": {
                    "a": {"bot_token": TOKEN_WORK, "mode": "polling"},
                    "b": {"bot_token": TOKEN_WORK, "mode": "polling"},
                }
            },
            ConfigError,
            "'a' and 'b' have the same bot",
        ),
        (
            {"telegram_accounts": {"work": {"bot_token": TOKEN_WORK}}},
            ConfigError,
            "SB_TELEGRAM_ACCOUNTS 'work' webhook_secret must be set in webhook mode",
        ),
        (
            {"telegram_accounts": {"work": {"bot_token": "nope", "mode": "polling"}}},
            ConfigError,
            "SB_TELEGRAM_ACCOUNTS 'work' bot_token is not a bot token",
        ),
    ],
)
def test_bad_accounts_are_refused_at_start(
    tmp_path: Path, values: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as info:
        configured_adapters(settings_for(tmp_path, **values))
    assert TOKEN_WORK not in str(info.value)


def test_the_file_takes_accounts_as_tables_with_references(tmp_path: Path) -> None:
    """``[gateway.telegram_accounts.work]`` with ``env:`` and ``file:`` references for the
    tokens inside: resolved into the JSON the variable holds."""
    (tmp_path / "work.secret").write_text("s3cret-" + uuid.uuid4().hex + "\n")
    path = tmp_path / "switchboard.toml"
    path.write_text(
        "[gateway.telegram_accounts.work]\n"
        'bot_token = "env:WORK_BOT_TOKEN"\n'
        'webhook_secret = "file:work.secret"\n'
        'mode = "webhook"\n'
    )
    path.chmod(0o600)
    loaded = load(path, {"WORK_BOT_TOKEN": TOKEN_WORK})
    accounts = json.loads(loaded.environ["SB_TELEGRAM_ACCOUNTS"])
    assert accounts["work"]["bot_token"] == TOKEN_WORK
    assert accounts["work"]["webhook_secret"].startswith("s3cret-")
    settings = settings_for(tmp_path, loaded.environ)
    assert settings.telegram_accounts["work"].bot_token.get_secret_value() == TOKEN_WORK


# --- Slack ------------------------------------------------------------------------------------


async def test_two_slack_workspaces_each_with_its_own_signing_secret(
    nats_url: str, tmp_path: Path
) -> None:
    events_a = SlackEvents(team_id="T0AAA")
    events_b = SlackEvents(team_id="T0BBB")
    with FakeSlack(team_id="T0AAA") as slack_a, FakeSlack(team_id="T0BBB") as slack_b:
        accounts = {
            name: {"bot_token": fake.token, "signing_secret": ev.secret, "api_base": fake.base_url}
            for name, fake, ev in (("a", slack_a, events_a), ("b", slack_b, events_b))
        }
        async with serving(nats_url, tmp_path, slack_accounts=accounts) as gw:
            body, headers = events_a.request(
                events_a.envelope(events_a.message("U0ADA", "hello a", "D0SAME"))
            )
            refused = await gw.client.post("/channels/slack/b", content=body, headers=headers)
            assert refused.status_code == 401, refused.text  # A's signature on B's URL
            unknown = await gw.client.post("/channels/slack/c", content=body, headers=headers)
            assert unknown.status_code == 404, unknown.text
            assert (
                await gw.client.post("/channels/slack/default", content=body)
            ).status_code == 404
            response = await gw.client.post("/channels/slack/a", content=body, headers=headers)
            assert response.status_code == 200, response.text
            body, headers = events_b.request(
                events_b.envelope(events_b.message("U0ADA", "hello b", "D0SAME"))
            )
            response = await gw.client.post("/channels/slack/b", content=body, headers=headers)
            assert response.status_code == 200, response.text

            messages = await eventually_inbound(gw, 2)
            by_account = {m.account: m for m in messages}
            assert set(by_account) == {"a", "b"} and by_account["b"].text == "hello b"
            await gw.reply(by_account["b"], "answer in b")
            [post] = await asyncio.to_thread(slack_b.wait_for_posts, 1, 15.0)
            assert (post.channel, post.text) == ("D0SAME", "answer in b")
            await gw.reply(by_account["a"], "answer in a")
            [post] = await asyncio.to_thread(slack_a.wait_for_posts, 1, 15.0)
            assert post.text == "answer in a"
            assert [p.text for p in slack_b.posts] == ["answer in b"]


def test_a_slack_account_without_its_signing_secret_is_refused(tmp_path: Path) -> None:
    accounts = {"a": {"bot_token": "xoxb-1", "signing_secret": ""}}
    with pytest.raises(ConfigError, match="SB_SLACK_ACCOUNTS 'a' needs a bot_token and a"):
        configured_adapters(settings_for(tmp_path, slack_accounts=accounts))
