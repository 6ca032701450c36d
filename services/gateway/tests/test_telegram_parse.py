"""Telegram Updates -> inbound messages (``parse_update``, shared by the webhook and polling):
each kind of message as the Bot API sends it, mentions of the bot, topics, replies, media
references, and what is not an Update."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.base import BadPayload
from switchboard_gateway.channels.telegram_inbound import (
    BotInfo,
    parse_media_ref,
    parse_update,
    telegram_message_id,
)
from tests.fakes.telegram_objects import TelegramUpdates

BOT = BotInfo(7000000001, "switchboard_test_bot")
U = TelegramUpdates("unused-secret", BOT.username, BOT.id)


def parse_one(update: dict[str, Any]) -> messages_pb2.InboundMessage:
    [message] = parse_update(update, BOT)
    return message


def test_chat_types_and_senders() -> None:
    group, ada = U.group(-1001), U.user(42)
    assert parse_one(U.message("hi", user=ada)).chat == messages_pb2.ChatRef(id="42", type="direct")
    old_group = {"id": -77, "title": "Old", "type": "group"}
    assert parse_one(U.message("hi", chat=old_group)).chat.type == "group"
    message = parse_one(U.message("hi", user=ada, chat=group))
    assert (message.chat.id, message.chat.type, message.sender) == ("-1001", "group", "42")
    anonymous = U.message(
        "as the group", user=U.user(1087968824, "Group", "GroupAnonymousBot"), chat=group
    )
    anonymous["message"]["from"]["is_bot"] = True
    anonymous["message"]["sender_chat"] = group
    assert parse_one(anonymous).sender == "-1001"
    as_channel = U.message(
        "as my channel", user=U.user(136817688, "Channel", "Channel_Bot"), chat=group
    )
    as_channel["message"]["from"]["is_bot"] = True
    as_channel["message"]["sender_chat"] = {"id": -100999, "title": "Mine", "type": "channel"}
    assert parse_one(as_channel).sender == "-100999"


@pytest.mark.parametrize(
    ("text", "mentioned"),
    [
        ("hey @switchboard_test_bot what's up", True),
        ("hey @Switchboard_Test_Bot", True),  # usernames are case-insensitive
        ("😀😀 @switchboard_test_bot", True),  # offsets count UTF-16 units
        ("hey @someone_else", False),
        ("/start", True),
        ("/help@switchboard_test_bot now", True),
        ("/help@other_bot", False),
        ("no mention at all", False),
        ("switchboard_test_bot without the at", False),
    ],
)
def test_mentions_of_the_bot(text: str, mentioned: bool) -> None:
    assert parse_one(U.message(text, chat=U.group())).mentions_bot is mentioned


def test_a_text_mention_and_a_reply_to_the_bot_mention_it() -> None:
    entity = {"type": "text_mention", "offset": 0, "length": 3, "user": U.bot_user()}
    assert parse_one(U.message("Bot, hi", chat=U.group(), entities=[entity])).mentions_bot
    theirs = U.message_object("earlier", user=U.bot_user(), chat=U.group(), message_id=10)
    reply = parse_one(U.message("and?", chat=U.group(), reply_to_message=theirs))
    assert reply.mentions_bot and reply.reply_to == "-1001234567890:10"
    assert telegram_message_id(reply.reply_to) == 10
    someone = U.message_object("earlier", user=U.user(5), chat=U.group(), message_id=11)
    plain = parse_one(U.message("and?", chat=U.group(), reply_to_message=someone))
    assert not plain.mentions_bot and plain.reply_to == "-1001234567890:11"


def test_a_forum_topic_is_the_thread_and_its_root_no_reply() -> None:
    forum = U.group(-100777, forum=True)
    root = U.message_object(None, chat=forum, message_id=3, forum_topic_created={"name": "Ops"})
    message = parse_one(
        U.message(
            "in the topic",
            chat=forum,
            message_thread_id=3,
            is_topic_message=True,
            reply_to_message=root,
        )
    )
    assert (message.thread_id, message.reply_to) == ("3", "")
    # Outside a forum message_thread_id is a reply thread, not a topic: no thread.
    assert parse_one(U.message("x", chat=U.group(), message_thread_id=5)).thread_id == ""


def test_media_references() -> None:
    sizes = [
        {"file_id": "AgAD-small", "file_unique_id": "a", "width": 90, "height": 60},
        {"file_id": "AgAD-large_1", "file_unique_id": "b", "width": 1280, "height": 853},
        {"file_id": "AgAD-medium", "file_unique_id": "c", "width": 320, "height": 213},
    ]
    photo = parse_one(U.message(None, photo=sizes, caption="look"))
    assert (photo.text, list(photo.media)) == (
        "look",
        ["telegram:photo:AgAD-large_1?mime=image%2Fjpeg"],
    )
    doc = {"file_id": "BQAC_d0c", "file_unique_id": "d", "file_name": "Q1 report & notes.pdf",
           "mime_type": "application/pdf", "file_size": 1234}  # fmt: skip
    voice = {"file_id": "AwAC-v", "file_unique_id": "v", "duration": 3, "mime_type": "audio/ogg"}
    audio = {"file_id": "CQAC-a", "file_unique_id": "a", "duration": 60, "file_name": "song.mp3"}
    video = {"file_id": "BAAC-v", "file_unique_id": "w", "width": 1, "height": 1, "duration": 2}
    for kind, item, ref in [
        ("document", doc, "telegram:document:BQAC_d0c?mime=application%2Fpdf"
                          "&name=Q1%20report%20%26%20notes.pdf"),
        ("voice", voice, "telegram:voice:AwAC-v?mime=audio%2Fogg"),
        ("audio", audio, "telegram:audio:CQAC-a?name=song.mp3"),
        ("video", video, "telegram:video:BAAC-v"),
    ]:  # fmt: skip
        message = parse_one(U.message(None, **{kind: item}))
        assert (message.text, list(message.media)) == ("", [ref])
        parsed = parse_media_ref(ref)
        assert parsed is not None and (parsed.kind, parsed.file_id) == (kind, item["file_id"])
        assert (parsed.mime, parsed.name) == (item.get("mime_type", ""), item.get("file_name", ""))
    bad = U.message("x", document={"file_id": "../etc/passwd", "file_unique_id": "z"})
    assert list(parse_one(bad).media) == []
    assert parse_media_ref("https://example.com/a.png") is None


def test_the_same_update_parses_to_the_same_message() -> None:
    update = U.message("same", chat=U.group(), reply_to_message=U.message_object("x"))
    assert parse_update(update, BOT) == parse_update(update, BOT)


def test_parse_refuses_what_is_not_an_update() -> None:
    updates: list[object] = [
        None,
        [],
        {"update_id": True, "message": {}},
        {"update_id": 1, "message": []},
    ]
    for update in updates:
        with pytest.raises(BadPayload):
            parse_update(update, BOT)
