"""Several Discord applications on one gateway (issue 27), as test_channel_accounts.py does
for Telegram and Slack: one fake Discord per application, each with its own signing key and
bot token; an interaction is verified with its own application's public key only, published
under its account, and the reply for it posted with that application's bot token."""

from __future__ import annotations

import asyncio
from pathlib import Path

from switchboard_gateway.channels.accounts import Accounts
from tests.fakes.discord import FakeDiscord

from .accounts_harness import eventually_inbound, serving

CHANNEL = "4200000000000000042"


async def test_two_discord_applications_each_with_its_own_key_and_token(
    nats_url: str, tmp_path: Path
) -> None:
    with FakeDiscord() as first, FakeDiscord() as second:
        apps = {
            name: {
                "bot_token": fake.token,
                "public_key": fake.interactions.public_key,
                "application_id": fake.interactions.application_id,
                "api_base": fake.base_url,
            }
            for name, fake in (("first", first), ("second", second))
        }
        async with serving(nats_url, tmp_path, discord_accounts=apps) as gw:
            channel = gw.adapters["discord"]
            assert isinstance(channel, Accounts) and channel.accounts == ("first", "second")
            command = first.interactions.slash_command("hello first", channel_id=CHANNEL)
            body, headers = first.interactions.request(command)
            refused = await gw.client.post(
                "/channels/discord/second", content=body, headers=headers
            )
            assert refused.status_code == 401, refused.text  # first's signature, second's URL
            unknown = await gw.client.post(
                "/channels/discord/default", content=body, headers=headers
            )
            assert unknown.status_code == 404, unknown.text
            response = await gw.client.post(
                "/channels/discord/first", content=body, headers=headers
            )
            assert response.status_code == 200, response.text

            [message] = await eventually_inbound(gw, 1)
            assert (message.account, message.text) == ("first", "hello first")
            message.ClearField("reply_context")  # a channel message, not the interaction's
            await gw.reply(message, "answer from first")

            def posted(fake: FakeDiscord) -> list[str] | None:
                return [m.content for m in fake.messages_in(CHANNEL)] or None

            texts = await asyncio.to_thread(first.wait_for, posted, 15.0)
            assert texts == ["answer from first"]
            assert second.messages_in(CHANNEL) == []
