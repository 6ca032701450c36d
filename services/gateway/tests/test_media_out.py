"""Files of reply parts as each adapter formats them (no platform call): Telegram's caption when
the text fits 1024 characters (else the text first, then the file) and the Bot API method per
type, Discord's attachment with the text as its content when it fits one message, Slack's
upload after the text; and the failures of loading a file for an upload."""

from __future__ import annotations

import pytest

from switchboard import rpc
from switchboard.embedded import free_port
from switchboard.media import MediaClient, media_ref, parse_media_ref
from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.base import RetryLater, Undeliverable
from switchboard_gateway.channels.discord import DiscordAdapter
from switchboard_gateway.channels.media_out import load, upload_spec
from switchboard_gateway.channels.slack import SlackAdapter
from switchboard_gateway.channels.telegram import TelegramAdapter
from switchboard_gateway.channels.telegram_media import upload_method

PHOTO = media_ref("a" * 64, "image/jpeg", "cat photo.jpeg")
VOICE = media_ref("b" * 64, "audio/ogg")
GIF = media_ref("c" * 64, "image/gif")
KEY = "0" * 64  # a Discord public key (hex)


def part(text: str, *media: str, chat: str = "4242") -> messages_pb2.OutboundMessage:
    return messages_pb2.OutboundMessage(
        run_id="run_1", chat=messages_pb2.ChatRef(id=chat), text=text, media=list(media)
    )


def test_telegram_caption_or_text_first_and_the_method_per_type() -> None:
    tg = TelegramAdapter("1:abc", "secret")
    [photo] = tg.format(part("**look**", PHOTO))
    assert photo.payload["method"] == "sendPhoto"
    assert photo.payload["params"] == {
        "chat_id": 4242,
        "caption": "<b>look</b>",
        "parse_mode": "HTML",
    }
    assert photo.payload["upload"] == {
        "sha256": "a" * 64,
        "mime": "image/jpeg",
        "name": "cat_photo.jpg",
    }
    long = tg.format(part("x" * 1500, PHOTO, VOICE, GIF))
    assert [m.payload["method"] for m in long] == [
        "sendMessage",
        "sendPhoto",
        "sendVoice",
        "sendDocument",
    ]
    assert all("caption" not in m.payload["params"] for m in long[1:])
    assert upload_method("sendPhoto", 11 * 1024 * 1024) == "sendDocument"


def test_discord_attachment_with_its_content_or_after_the_text() -> None:
    dc = DiscordAdapter("token", KEY)
    [one] = dc.format(part("look", PHOTO, chat="123456789012345678"))
    body = one.payload["json"]
    assert body["content"] == "look" and body["attachments"] == [
        {"id": 0, "filename": "cat_photo.jpg"}
    ]
    assert one.payload["upload"]["sha256"] == "a" * 64
    many = dc.format(part("y" * 2500, PHOTO, chat="123456789012345678"))
    assert [bool(m.payload.get("upload")) for m in many] == [False, False, True]
    assert many[2].payload["json"]["content"] == ""
    assert len({m.payload["json"]["nonce"] for m in many}) == 3  # each its own nonce


def test_slack_uploads_after_the_text() -> None:
    sl = SlackAdapter("xoxb-1", "secret")
    text, upload = sl.format(part("look", PHOTO, chat="C1"))
    assert text.payload == {"text": "look", "channel": "C1"}
    assert upload.payload["upload"]["name"] == "cat_photo.jpg"
    [only] = sl.format(part("", GIF, chat="C1"))
    assert only.payload["upload"]["mime"] == "image/gif"


async def test_loading_a_file_without_or_with_the_media_service_away() -> None:
    spec = upload_spec(parse_media_ref(PHOTO))  # type: ignore[arg-type]
    with pytest.raises(Undeliverable):
        await load(None, spec)
    channel = rpc.channel(f"127.0.0.1:{free_port()}", "media-away-token-" + "x" * 20)
    try:
        with pytest.raises(RetryLater):
            await load(MediaClient(channel), spec)
    finally:
        await channel.close()
