"""Slack's Events API at POST /channels/slack/default: the gateway in-process on a real
nats-server with the real Slack adapter (started against the fake Slack Web API), fed signed
calls in Slack's own shapes. Verified by the signing secret within the replay window, parsed
into INBOUND messages published once per Slack message however often Slack sends it."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchboard import registry
from switchboard.errors import ConfigError
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.app import create_app
from switchboard_gateway.channels import configured_adapters
from switchboard_gateway.channels.base import InboundRequest, Unauthorized
from switchboard_gateway.channels.slack import SlackAdapter, from_settings
from switchboard_gateway.config import GatewaySettings
from tests.fakes.slack import FakeSlack, SlackEvents
from tests.support.streams import stored as stream_messages

from .gateway_harness import absent_address, client_on

HOOK = "/channels/slack/default"
BOT = "U0BOT"
TOKEN = f"gw-{uuid.uuid4().hex}"


@dataclass
class SlackGateway:
    rt: ServiceRuntime
    client: httpx.AsyncClient
    adapter: SlackAdapter
    events: SlackEvents

    async def post(self, payload: dict[str, Any] | bytes, **signing: Any) -> httpx.Response:
        body, headers = self.events.request(payload, **signing)
        return await self.client.post(HOOK, content=body, headers=headers)

    async def inbound(self) -> list[tuple[str, messages_pb2.InboundMessage]]:
        """(Nats-Msg-Id, message) of everything INBOUND holds."""
        stream = self.rt.subjects.stream("INBOUND")
        found = await stream_messages(self.rt.js, stream, messages_pb2.InboundMessage)
        return [(s.msg_id, s.message) for s in found]


def settings_for(home: Path, nats_url: str, **slack: str) -> GatewaySettings:
    return GatewaySettings.from_environ(
        {}, home=home, nats_url=nats_url, gateway_token=TOKEN, log_json=False, **slack
    )


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(bot_user_id=BOT) as fake:
        yield fake


@asynccontextmanager
async def slack_gateway(nats_url: str, home: Path, slack: FakeSlack) -> AsyncIterator[SlackGateway]:
    events = SlackEvents(bot_user_id=BOT)
    with absent_address() as agent_addr:
        settings = settings_for(
            home,
            nats_url,
            agent_addr=agent_addr,
            slack_bot_token=slack.token,
            slack_signing_secret=events.secret,
            slack_api_base=slack.base_url,
        )
        adapters = configured_adapters(settings)
        adapter = adapters["slack"]
        assert isinstance(adapter, SlackAdapter)
        async with ServiceRuntime(registry.get("gateway"), settings, asyncio.Event()) as rt:
            await adapter.start(rt)
            app = create_app(settings, rt, adapters)
            async with app.router.lifespan_context(app), client_on(app) as client:
                yield SlackGateway(rt, client, adapter, events)
            await adapter.close()


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path, slack: FakeSlack) -> AsyncIterator[SlackGateway]:
    async with slack_gateway(nats_url, tmp_path, slack) as gateway:
        yield gateway


async def test_start_learns_the_bot_user_from_auth_test(gw: SlackGateway, slack: FakeSlack) -> None:
    assert (gw.adapter.bot_user_id, gw.adapter.bot_id) == (BOT, "B0BOT")
    assert [(c.method, c.status, c.error) for c in slack.calls] == [("auth.test", 200, "")]


async def test_signature_good_bad_and_missing(gw: SlackGateway) -> None:
    event = gw.events.envelope(gw.events.message("U1", "hello", "D1"))
    body, headers = gw.events.request(event)
    other = SlackEvents()  # another app's secret
    tampered = body.replace(b"hello", b"hullo")
    refused = [
        (body, {}),
        (body, {k: v for k, v in headers.items() if k != "x-slack-signature"}),
        (body, {k: v for k, v in headers.items() if k != "x-slack-request-timestamp"}),
        (body, {**headers, "x-slack-signature": "v0=" + "0" * 64}),
        (body, {**headers, "x-slack-signature": headers["x-slack-signature"].upper()}),
        (body, {**headers, "x-slack-signature": other.request(event)[1]["x-slack-signature"]}),
        (body, {**headers, "x-slack-request-timestamp": "12ab"}),
        (tampered, headers),
    ]
    for content, sent in refused:
        response = await gw.client.post(HOOK, content=content, headers=sent)
        assert response.status_code == 401, (sent, response.text)
        error = response.json()["error"]
        assert error["code"] == "channel_refused"
        assert gw.events.secret not in response.text
    assert await gw.inbound() == []
    response = await gw.client.post(HOOK, content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert [msg_id for msg_id, _ in await gw.inbound()] == [
        f"slack:default:D1:{event['event']['ts']}"
    ]


async def test_a_stale_or_replayed_request_is_refused(gw: SlackGateway) -> None:
    event = gw.events.envelope(gw.events.message("U1", "hello", "D1"))
    for skew in (-600, 600):  # signed correctly, ten minutes off the gateway's clock
        response = await gw.post(event, timestamp=int(time.time()) + skew)
        assert response.status_code == 401, response.text
        assert response.json()["error"]["message"] == "replayed or stale request"
    assert await gw.inbound() == []


def test_the_replay_window_edges() -> None:
    """Five minutes either way is accepted, a second more is not (the clock is injected)."""
    events = SlackEvents()
    now = 1_700_000_000
    adapter = SlackAdapter("xoxb-test", events.secret, now=lambda: float(now))
    body = json.dumps(events.url_verification("c")).encode()

    def call(timestamp: int) -> InboundRequest:
        _, headers = events.request(body, timestamp=timestamp)
        return InboundRequest("slack", "default", headers, body, 0)

    for timestamp in (now - 300, now, now + 300):
        adapter.verify(call(timestamp))
    for timestamp in (now - 301, now + 301, 0):
        with pytest.raises(Unauthorized, match=r"^replayed or stale request$"):
            adapter.verify(call(timestamp))


async def test_url_verification_is_answered_after_the_signature(gw: SlackGateway) -> None:
    challenge = gw.events.url_verification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
    response = await gw.post(challenge)
    assert response.status_code == 200, response.text
    assert response.json() == {"challenge": challenge["challenge"]}
    unsigned = await gw.client.post(HOOK, json=challenge)
    assert unsigned.status_code == 401
    assert challenge["challenge"] not in unsigned.text
    assert await gw.inbound() == []


async def test_app_mention_and_direct_messages(gw: SlackGateway) -> None:
    ev = gw.events
    mention = ev.app_mention("U1", f"<@{BOT}> what &amp; why?", "C1")
    threaded = ev.app_mention("U2", f"<@{BOT}> and this", "C1", thread_ts=mention["ts"])
    dm = ev.message("U3", "hi <https://example.com|there>", "D3")
    dm_thread = ev.message("U3", "more", "D3", thread_ts=dm["ts"])
    for event in (mention, threaded, dm, dm_thread):
        assert (await gw.post(ev.envelope(event))).status_code == 200
    published = await gw.inbound()
    assert [msg_id for msg_id, _ in published] == [
        f"slack:default:{e['channel']}:{e['ts']}" for e in (mention, threaded, dm, dm_thread)
    ]
    got = [
        (m.sender, m.chat.id, m.chat.type, m.text, m.thread_id, m.mentions_bot, m.edited)
        for _, m in published
    ]
    assert got == [
        ("U1", "C1", "group", "what & why?", mention["ts"], True, False),  # a thread starts on it
        ("U2", "C1", "group", "and this", mention["ts"], True, False),
        ("U3", "D3", "direct", "hi [there](https://example.com)", "", False, False),
        ("U3", "D3", "direct", "more", dm["ts"], False, False),
    ]
    assert all((m.channel, m.account) == ("slack", "default") for _, m in published)


async def test_bot_messages_and_other_subtypes_are_ignored(gw: SlackGateway) -> None:
    ev = gw.events
    ignored = [
        ev.message(BOT, "my own reply", "D1", bot_id="B0BOT"),
        ev.message(BOT, "my own reply, without bot_id", "D1"),
        ev.message("U9", "another bot", "C1", "channel", bot_id="B9"),
        ev.message("U9", "legacy bot", "C1", "channel", subtype="bot_message"),
        ev.message("U1", "<@U1> has joined the channel", "C1", "channel", subtype="channel_join"),
        ev.message("U1", "", "D1", subtype="message_deleted"),
        ev.message("U1", "", "D1"),  # no text, no files
        {"type": "reaction_added", "user": "U1", "reaction": "+1", "event_ts": ev.ts()},
    ]
    for event in ignored:
        response = await gw.post(ev.envelope(event))
        assert response.status_code == 200, (event, response.text)
    assert (await gw.post({"type": "app_rate_limited", "team_id": "T0FAKE"})).status_code == 200
    assert await gw.inbound() == []


async def test_edits_and_files(gw: SlackGateway) -> None:
    ev = gw.events
    original = ev.message("U1", "teh question", "D1")
    edit_ts = ev.ts()
    changed = ev.message("U1", "", "D1", subtype="message_changed", ts=edit_ts, hidden=True)
    changed.update(
        message={**original, "text": "the question", "edited": {"user": "U1", "ts": edit_ts}},
        previous_message=original,
    )
    unfurl = ev.message("U1", "", "D1", subtype="message_changed", message=original)
    files = [{"id": "F1", "name": "a.png", "url_private": "https://files.slack.com/a.png"}]
    shared = ev.message("U1", "", "D1", subtype="file_share", files=[*files, {"id": "F2"}])
    for event in (original, changed, changed, unfurl, shared):
        assert (await gw.post(ev.envelope(event))).status_code == 200
    published = [m for _, m in await gw.inbound()]
    assert [(m.message_id, m.text, m.edited) for m in published[:2]] == [
        (f"D1:{original['ts']}", "teh question", False),
        (f"D1:{original['ts']}:edit:{edit_ts}", "the question", True),
    ]
    assert len(published) == 3  # the repeated edit is one, the unfurl none
    assert list(published[2].media) == ["https://files.slack.com/a.png", "slack:file:F2"]


async def test_a_message_sent_as_message_app_mention_and_retries_is_published_once(
    gw: SlackGateway,
) -> None:
    ev = gw.events
    text = f"<@{BOT}> deploy please"
    mention = ev.app_mention("U1", text, "C1")
    as_message = ev.message("U1", text, "C1", "channel", ts=mention["ts"])
    as_message["client_msg_id"] = mention["client_msg_id"]
    first = ev.envelope(as_message)
    second = ev.envelope(mention)
    calls = [(first, None), (second, None), (second, 1), (first, 2), (second, 2)]
    for envelope, retry in calls:
        response = await gw.post(envelope, retry_num=retry)
        assert response.status_code == 200, response.text
    [(msg_id, message)] = await gw.inbound()
    assert msg_id == f"slack:default:C1:{mention['ts']}"
    assert (message.text, message.mentions_bot, message.thread_id) == (
        "deploy please",
        True,
        mention["ts"],
    )


async def test_a_malformed_call_is_400_and_nothing_is_published(gw: SlackGateway) -> None:
    ev = gw.events
    good = ev.message("U1", "hi", "D1")
    bad: list[dict[str, Any] | bytes] = [
        b"{not json",
        b"\xff\xfe",
        b"[1, 2]",
        {"no": "type"},
        {"type": "url_verification"},
        {"type": "event_callback"},
        {"type": "event_callback", "event": "message"},
        ev.envelope({**good, "ts": None}),
        ev.envelope({**good, "ts": "yesterday"}),
        ev.envelope({**good, "channel": 7}),
        ev.envelope({**good, "channel": "C1\nX-Injected: 1"}),
        ev.envelope({**good, "user": None}),
        ev.envelope({**good, "text": ["hi"]}),
        ev.envelope({**good, "files": "F1"}),
        ev.envelope({**good, "subtype": "message_changed"}),
    ]
    for payload in bad:
        response = await gw.post(payload)
        assert response.status_code == 400, (payload, response.text)
        assert response.json()["error"]["code"] == "channel_refused"
    assert await gw.inbound() == []


def test_from_settings_needs_both_or_neither(tmp_path: Path) -> None:
    url = "nats://127.0.0.1:1"
    assert from_settings(settings_for(tmp_path, url)) is None
    token, secret = "xoxb-" + "1" * 30, "s" * 32
    both = from_settings(
        settings_for(tmp_path, url, slack_bot_token=token, slack_signing_secret=secret)
    )
    assert isinstance(both, SlackAdapter) and token not in repr(both)
    for given, missing, value in [
        ({"slack_bot_token": token}, "SB_SLACK_SIGNING_SECRET", token),
        ({"slack_signing_secret": secret}, "SB_SLACK_BOT_TOKEN", secret),
    ]:
        with pytest.raises(ConfigError, match=f"{missing} is not") as refused:
            from_settings(settings_for(tmp_path, url, **given))
        assert value not in str(refused.value)


async def test_a_token_slack_refuses_stops_the_start(slack: FakeSlack) -> None:
    wrong = "xoxb-wrong-" + "9" * 20
    adapter = SlackAdapter(wrong, "secret", slack.base_url)
    with pytest.raises(ConfigError, match="invalid_auth") as refused:
        await adapter.start(None)
    assert wrong not in str(refused.value)
