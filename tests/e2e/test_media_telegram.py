"""Telegram attachments end to end: every service as a real process, the gateway against the
fake Bot API (getFile and the file download), the media service against the fake
transcription server, the agent against the fake model. A photo reaches the model as an image
block (resized, in the Chat Completions wire format), a voice note as its transcript; a file
Telegram cannot give is passed on as a reference and the run still answers."""

from __future__ import annotations

import base64
import hashlib
import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.e2e.helpers import wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import TelegramUpdates
from tests.fakes.transcription import FakeTranscription
from tests.support import media_files
from tests.support.services import ServiceProcesses, with_fake_model

HOOK = "/channels/telegram/default"
SECRET = "tg-media-" + uuid.uuid4().hex


def answer(req: FakeRequest) -> Reply:
    return Reply(text="got it")


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def transcription() -> Iterator[FakeTranscription]:
    with FakeTranscription(require_key="tr-e2e") as fake:
        yield fake


@pytest.fixture
def services(
    tmp_path: Path,
    nats_url: str,
    database_url: str,
    tg: FakeTelegram,
    transcription: FakeTranscription,
) -> Iterator[ServiceProcesses]:
    env = {
        "SB_TELEGRAM_BOT_TOKEN": tg.token,
        "SB_TELEGRAM_WEBHOOK_SECRET": SECRET,
        "SB_TELEGRAM_API_BASE": tg.base_url,
        "SB_TRANSCRIPTION_BASE_URL": transcription.base_url,
        "SB_TRANSCRIPTION_API_KEY": "tr-e2e",
    }
    with with_fake_model(tmp_path, nats_url, database_url, answer, env) as procs:
        yield procs


def post(services: ServiceProcesses, updates: TelegramUpdates, update: dict[str, Any]) -> None:
    body, headers = updates.webhook(update)
    response = httpx.post(services.url + HOOK, content=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text


def last_user_content(llm: FakeLLM) -> list[dict[str, Any]]:
    user = [m for m in llm.calls[-1].request.messages if m.get("role") == "user"][-1]
    content = user["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def test_a_photo_and_a_voice_note_reach_the_model(
    services: ServiceProcesses,
    tg: FakeTelegram,
    transcription: FakeTranscription,
) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    updates = TelegramUpdates(SECRET, bot_username=tg.username, bot_id=tg.bot_id)
    ada = updates.user(4242)

    photo = media_files.jpeg(2000, 1000)
    tg.files["AgACAgPhoto1"] = photo
    sizes = [
        {"file_id": "AgACAgThumb", "file_unique_id": "t", "width": 90, "height": 45},
        {"file_id": "AgACAgPhoto1", "file_unique_id": "p", "width": 2000, "height": 1000},
    ]
    post(services, updates, updates.message(user=ada, photo=sizes, caption="what is this?"))
    wait_for(lambda: tg.sent_to(4242), timeout=60, what="the photo's reply")
    assert tg.downloads == ["files/AgACAgPhoto1"]  # the largest size, through getFile
    content = last_user_content(llm)
    assert content[0] == {"type": "text", "text": "what is this?"}
    (image,) = [p for p in content if p.get("type") == "image_url"]
    head, _, payload = image["image_url"]["url"].partition(",")
    assert head == "data:image/jpeg;base64"
    assert Image.open(io.BytesIO(base64.b64decode(payload))).size == (1568, 784)

    voice = media_files.ogg_voice()
    transcription.texts[hashlib.sha256(voice).hexdigest()] = "remind me to call mum"
    tg.files["AwACAgVoice1"] = voice
    note = {
        "file_id": "AwACAgVoice1",
        "file_unique_id": "v",
        "duration": 2,
        "mime_type": "audio/ogg",
    }
    post(services, updates, updates.message(user=ada, voice=note))
    wait_for(lambda: len(tg.sent_to(4242)) >= 2, timeout=60, what="the voice note's reply")
    texts = [p["text"] for p in last_user_content(llm) if p.get("type") == "text"]
    assert "[voice note] remind me to call mum" in texts
    (upload,) = transcription.seen()
    assert upload.size == len(voice) and upload.content_type == "audio/ogg"

    # A file Telegram will not give (unknown file_id): still a message, with a note.
    post(
        services, updates, updates.message(user=ada, photo=[{**sizes[0], "file_id": "AgACAgGone"}])
    )
    wait_for(lambda: len(tg.sent_to(4242)) >= 3, timeout=60, what="the third reply")
    texts = [p["text"] for p in last_user_content(llm) if p.get("type") == "text"]
    assert any("could not be loaded" in t for t in texts), texts
