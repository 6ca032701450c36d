"""Slack files both ways, end to end: every service a real process, the gateway against the
fake Slack. A message's file is downloaded from its ``url_private`` with the bot token (and
nothing else: the SSRF guard lets the gateway reach only the origins configured), ingested,
and reaches the model as an image block; the model sends it back with the ``message`` tool and
the gateway uploads it as ``files_upload_v2`` does (files.getUploadURLExternal, the bytes,
files.completeUploadExternal), once. A file Slack does not give stays a link and the message
is still answered."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import wait_for
from tests.e2e.media_scripts import send_back
from tests.fakes.llm import FakeLLM
from tests.fakes.slack import FakeSlack, SlackEvents
from tests.support import media_files
from tests.support.services import ServiceProcesses, with_fake_model

HOOK = "/channels/slack/default"
BOT = "U0BOT"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(bot_user_id=BOT) as fake:
        yield fake


@pytest.fixture
def events() -> SlackEvents:
    return SlackEvents(bot_user_id=BOT)


@pytest.fixture
def services(
    tmp_path: Path, nats_url: str, database_url: str, slack: FakeSlack, events: SlackEvents
) -> Iterator[ServiceProcesses]:
    env = {
        "SB_SLACK_BOT_TOKEN": slack.token,
        "SB_SLACK_SIGNING_SECRET": events.secret,
        "SB_SLACK_API_BASE": slack.base_url,
        # The fake's file host stands for https://files.slack.com, on loopback.
        "SB_SLACK_FILE_ORIGINS": json.dumps([slack.base_url.removesuffix("/api/")]),
        "SB_SLACK_FILE_ALLOW_CIDRS": json.dumps(["127.0.0.1/32"]),
    }
    with with_fake_model(tmp_path, nats_url, database_url, send_back, env) as procs:
        yield procs


def deliver(services: ServiceProcesses, events: SlackEvents, event: dict[str, Any]) -> None:
    body, headers = events.request(events.envelope(event))
    response = httpx.post(services.url + HOOK, content=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text


def test_a_slack_file_is_ingested_and_sent_back_as_an_upload(
    services: ServiceProcesses, slack: FakeSlack, events: SlackEvents
) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    photo = media_files.jpeg(300, 200)
    file = slack.files.serve("photo.jpg", photo)
    shared = events.message("U1", "", "D1", subtype="file_share", files=[file])
    deliver(services, events, shared)

    [upload] = wait_for(lambda: slack.files.shared(), timeout=90, what="the upload")
    assert upload.data == photo  # the stored bytes, sent back as they came in
    assert (upload.channel, upload.filename, upload.title) == ("D1", "photo.jpg", "photo.jpg")
    # The download: the bot token in the Authorization header, from the configured origin.
    [(path, authorization)] = slack.files.downloads
    assert path.endswith("/photo.jpg") and authorization == f"Bearer {slack.token}"
    # The model saw the image (a JPEG image block) and its reference.
    first = [m for m in llm.calls[0].request.messages if m.get("role") == "user"][-1]
    kinds = [p.get("type") for p in first["content"]]
    assert "image_url" in kinds
    posts = slack.wait_for_posts(1, timeout=60)
    assert posts[0].text == "here it is"  # the message tool's text, before its file
    wait_for(lambda: len(slack.posts) >= 2, timeout=60, what="the run's reply")
    assert slack.posts[1].text == "done: sent to slack chat D1 with 1 file(s)"
    methods = [c.method for c in slack.calls]
    assert methods.count("files.getUploadURLExternal") == 1
    assert methods.count("files.completeUploadExternal") == 1

    # A file Slack will not give (gone): the message still reaches the model, with a note.
    gone = {**slack.files.serve("gone.png", b"x"), "url_private": file["url_private"] + "-gone"}
    deliver(services, events, events.message("U1", "and this?", "D1", files=[gone]))
    wait_for(lambda: len(llm.calls) >= 3, timeout=60, what="the second message's run")
    last = [m for m in llm.calls[2].request.messages if m.get("role") == "user"][-1]
    assert "could not be loaded" in json.dumps(last), last
    log = (services.home / "logs" / "gateway.log").read_text()
    assert "slack file not ingested (slack answered 404)" in log
    assert slack.token not in log
