"""Images sent back, end to end: every service a real process, the fake model calling the
agent's ``message`` tool with a ``media:`` reference. On Telegram the photo goes out as a real
``sendPhoto`` multipart upload of the stored bytes (the text as its caption), once, after a
5xx; on Discord as a message with ``files[0]`` and ``payload_json``; a reference the media
service does not know is a tool error and nothing is sent.

One system (and one fake Telegram and Discord) for the module: each test its own chats, the
fake Telegram's records cleared before each."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

from switchboard import rpc
from switchboard.media import MediaClient, media_ref
from tests.e2e import helpers
from tests.e2e.helpers import final_text, wait_for
from tests.e2e.media_scripts import send_back
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.support import media_files
from tests.support.services import ServiceProcesses, with_fake_model

HOOK = "/channels/telegram/default"
SECRET = "tg-send-" + uuid.uuid4().hex
OPS_CHANNEL = "123456789012345678"
TARGETS = {"ops": {"channel": "discord", "chat_id": OPS_CHANNEL, "chat_type": "group"}}


@pytest.fixture(scope="module")
def telegram_platform() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture(scope="module")
def discord() -> Iterator[FakeDiscord]:
    """Only test_an_image_goes_to_discord_as_an_attachment sends to Discord."""
    with FakeDiscord() as fake:
        yield fake


@pytest.fixture
def tg(services: ServiceProcesses, telegram_platform: FakeTelegram) -> FakeTelegram:
    telegram_platform.reset()
    return telegram_platform


@pytest.fixture(scope="module")
def services(
    tmp_path_factory: pytest.TempPathFactory,
    module_nats_url: str,
    module_database_url: str,
    telegram_platform: FakeTelegram,
    discord: FakeDiscord,
) -> Iterator[ServiceProcesses]:
    tg = telegram_platform
    env = {
        "SB_TELEGRAM_BOT_TOKEN": tg.token,
        "SB_TELEGRAM_WEBHOOK_SECRET": SECRET,
        "SB_TELEGRAM_API_BASE": tg.base_url,
        "SB_DISCORD_BOT_TOKEN": discord.token,
        "SB_DISCORD_PUBLIC_KEY": discord.interactions.public_key,
        "SB_DISCORD_API_BASE": discord.base_url,
        "SB_MESSAGE_TARGETS": json.dumps(TARGETS),
    }
    home = tmp_path_factory.mktemp("media-send")
    with with_fake_model(home, module_nats_url, module_database_url, send_back, env) as procs:
        yield procs


def ingest(services: ServiceProcesses, data: bytes) -> str:
    """``data`` stored by the running media service (its gRPC, as the gateway calls it)."""

    async def run() -> str:
        channel = rpc.channel(services.env["SB_MEDIA_ADDR"], services.env["SB_SERVICE_TOKEN"])
        try:
            ref = await MediaClient(channel).ingest_bytes(data)
        finally:
            await channel.close()
        return media_ref(ref.sha256, ref.mime)

    return asyncio.run(run())


def test_a_photo_goes_back_to_telegram_as_a_sendphoto_upload(
    services: ServiceProcesses, tg: FakeTelegram
) -> None:
    updates = TelegramUpdates(SECRET, bot_username=tg.username, bot_id=tg.bot_id)
    photo = media_files.jpeg(640, 480)
    tg.files["AgACAgSend1"] = photo
    sizes = [{"file_id": "AgACAgSend1", "file_unique_id": "s1", "width": 640, "height": 480}]
    tg.fail_next("sendPhoto", 500)  # the first upload fails: retried, sent once
    body, headers = updates.webhook(updates.message(user=updates.user(4242), photo=sizes))
    response = httpx.post(services.url + HOOK, content=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text

    # The tool's message and the run's reply are separate parts: the reply may come first
    # while the photo waits for its retry.
    sent = wait_for(lambda: len(tg.sent_to(4242)) >= 2 and tg.sent_to(4242), timeout=90)
    [photo_message] = [s for s in sent if s.method == "sendPhoto"]
    [reply] = [s for s in sent if s.method == "sendMessage"]
    assert photo_message.upload is not None
    assert photo_message.upload.data == photo  # the stored bytes, as they came in
    assert photo_message.upload.filename.endswith(".jpg")
    assert photo_message.upload.content_type == "image/jpeg"
    assert photo_message.text == "here it is"  # the caption
    assert reply.text == "done: sent to telegram chat 4242 with 1 file(s)"
    assert [c.status for c in tg.attempts("sendPhoto")] == [500, 200]
    assert len([s for s in tg.sent if s.method == "sendPhoto"]) == 1


def test_an_image_goes_to_discord_as_an_attachment(
    services: ServiceProcesses, discord: FakeDiscord
) -> None:
    image = media_files.png(32, 16)
    ref = ingest(services, image)
    key = "main:api:media-send"
    with helpers.client(services.url, services.token) as c:
        r = c.post(f"/api/sessions/{key}/messages", json={"text": f"send {ref} to ops"})
        assert r.status_code in (200, 202), r.text
        assert wait_for(lambda: final_text(c, key), timeout=60) == (
            f"done: sent to discord chat {OPS_CHANNEL} with 1 file(s)"
        )
        [message] = discord.wait_for(lambda d: d.messages_in(OPS_CHANNEL), timeout=60)
        assert message.content == "for the ops channel"
        [attachment] = message.attachments
        assert attachment.data == image
        assert (attachment.filename, attachment.content_type) == ("image.png", "image/png")

        unknown = media_ref("0" * 64, "image/png")
        other = "main:api:media-unknown"
        c.post(f"/api/sessions/{other}/messages", json={"text": f"send {unknown} to ops"})
        text = wait_for(lambda: final_text(c, other), timeout=60)
        assert "is not stored" in text and "nothing was sent" in text
        assert len(discord.messages_in(OPS_CHANNEL)) == 1
