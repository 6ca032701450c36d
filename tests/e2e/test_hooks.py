"""Webhooks against the real services (fake model, fake Slack and Telegram): POST /hooks/agent
with a target of SB_HOOKS_TARGETS to deliver to runs the agent in its hook session, and its
reply goes out as an OUTBOUND part for that chat and reaches the (fake) Slack channel or
Telegram chat; POST /hooks/wake runs in the main session as a marked system event and sends
nothing anywhere. Hooks stay in their lane (issue 23): a chat that is not a configured target,
or a session outside ``hook:`` (the owner's DM), is refused and nothing runs or is sent.

One system (and one of each fake) for the module: each test its own hook session, the fakes'
records cleared before each."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import nats
import pytest
from nats.aio.msg import Msg

from switchboard.tokens import generate
from switchboard.v1 import messages_pb2
from tests.e2e.helpers import client, next_reply
from tests.fakes.llm import FakeLLM, text_only
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram
from tests.lanes.pipeline import settle
from tests.support.services import ServiceProcesses, with_fake_model
from tests.support.streams import outbound_parts

REPLY = "The nightly build is green."
HOOKS_TOKEN = generate()
CHAT = "C0HOOKS"


@pytest.fixture(scope="module")
def slack_platform() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture(scope="module")
def telegram_platform() -> Iterator[FakeTelegram]:
    with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def slack(services: ServiceProcesses, slack_platform: FakeSlack) -> FakeSlack:
    return slack_platform


@pytest.fixture
def telegram(services: ServiceProcesses, telegram_platform: FakeTelegram) -> FakeTelegram:
    return telegram_platform


@pytest.fixture
def services(
    system: ServiceProcesses, slack_platform: FakeSlack, telegram_platform: FakeTelegram
) -> ServiceProcesses:
    """The module's system with the fakes' records (model, Slack, Telegram) cleared."""
    system.llm.reset()  # type: ignore[attr-defined]
    slack_platform.reset()
    telegram_platform.reset()
    return system


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory,
    module_nats_url: str,
    module_database_url: str,
    slack_platform: FakeSlack,
    telegram_platform: FakeTelegram,
) -> Iterator[ServiceProcesses]:
    slack, telegram = slack_platform, telegram_platform
    env = {
        "SB_HOOKS_TOKEN": HOOKS_TOKEN,
        "SB_SLACK_BOT_TOKEN": slack.token,
        "SB_SLACK_SIGNING_SECRET": generate(),
        "SB_SLACK_API_BASE": slack.base_url,
        "SB_TELEGRAM_BOT_TOKEN": telegram.token,
        "SB_TELEGRAM_WEBHOOK_SECRET": generate(),  # webhook mode without a URL: none is set
        "SB_TELEGRAM_API_BASE": telegram.base_url,
        "SB_HOOKS_TARGETS": json.dumps(
            {"team": {"channel": "slack", "to": CHAT}, "tg": {"channel": "telegram", "to": "4242"}}
        ),
    }
    home = tmp_path_factory.mktemp("hooks")
    script = text_only(REPLY)
    with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
        yield procs


def hook(url: str, path: str, body: object) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {HOOKS_TOKEN}"}
    response = httpx.post(f"{url}{path}", json=body, headers=headers, timeout=30)
    assert response.status_code == 202, response.text
    answer: dict[str, str] = response.json()
    return answer


async def deliver_and_watch(services: ServiceProcesses) -> messages_pb2.OutboundMessage:
    """POST /hooks/agent with a Slack chat to deliver to; the first OUTBOUND part published for
    Slack, seen on its subject (the gateway's delivery consumer takes it off the work-queue
    stream, so the stream is not where to look)."""
    nc = await nats.connect(services.nats_url)  # the admin's connection
    parts: asyncio.Queue[messages_pb2.OutboundMessage] = asyncio.Queue()

    async def on_part(msg: Msg) -> None:
        parts.put_nowait(messages_pb2.OutboundMessage.FromString(msg.data))

    try:
        await nc.subscribe("sb.outbound.slack.default", cb=on_part)
        await nc.flush()
        body = {
            "message": "How did the nightly build go?",
            "name": "nightly",
            "deliver": "team",  # SB_HOOKS_TARGETS' name for the Slack channel
        }
        answer = await asyncio.to_thread(hook, services.url, "/hooks/agent", body)
        assert answer["session_key"] == "hook:nightly"
        return await asyncio.wait_for(parts.get(), timeout=90)
    finally:
        await nc.close()


def test_an_agent_hooks_reply_is_delivered_to_the_chat(
    services: ServiceProcesses, slack: FakeSlack
) -> None:
    part = asyncio.run(deliver_and_watch(services))
    assert (part.channel, part.account, part.session_key) == ("slack", "default", "hook:nightly")
    assert (part.chat.id, part.text) == (CHAT, REPLY)
    assert (part.part, part.parts) == (0, 1)
    # The delivery consumer sends it to the platform.
    [post] = slack.wait_for_posts(1, timeout=60)
    assert (post.channel, post.text) == (CHAT, REPLY)
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    assert llm.calls[-1].request.last_user_text == "How did the nightly build go?"
    with client(services.url, services.token) as c:
        assert next_reply(c, "hook:nightly", 0) == REPLY


def test_an_agent_hooks_reply_reaches_a_telegram_chat(
    services: ServiceProcesses, telegram: FakeTelegram, slack: FakeSlack
) -> None:
    # The target written out in full, as SB_HOOKS_TARGETS has it.
    body = {"message": "Any news?", "name": "tg", "deliver": {"channel": "telegram", "to": "4242"}}
    answer = hook(services.url, "/hooks/agent", body)
    assert answer["session_key"] == "hook:tg"
    [sent] = telegram.wait_for_sent(1, timeout=90)
    assert (sent.method, sent.chat_id, sent.text) == ("sendMessage", 4242, REPLY)
    assert slack.posts == []  # only where it was asked to go


def test_a_wake_event_runs_in_the_main_session_and_is_not_delivered(
    services: ServiceProcesses, slack: FakeSlack
) -> None:
    settle(services.nats_url)
    before = asyncio.run(stored_parts(services.nats_url))  # what other tests left there
    answer = hook(services.url, "/hooks/wake", {"text": "Disk almost full on db-1"})
    assert answer["session_key"] == "main:hooks:main"
    with client(services.url, services.token) as c:
        assert next_reply(c, "main:hooks:main", 0, timeout=90) == REPLY
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    assert llm.calls[-1].request.last_user_text == (
        "[System event from webhook 'wake']\nDisk almost full on db-1"
    )
    # Once the lane item is answered (after the run's parts, if any, are out): none went out.
    settle(services.nats_url)
    new = [p for p in asyncio.run(stored_parts(services.nats_url)) if p not in before]
    assert new == []
    assert slack.posts == []


def test_a_hook_cannot_reach_a_chat_or_session_it_was_not_given(
    services: ServiceProcesses, slack: FakeSlack, telegram: FakeTelegram
) -> None:
    """The hooks token is the operator's, the payload is not: another chat than the configured
    targets (the owner's Telegram DM) and the owner's DM session are refused; no run starts,
    nothing is sent. The control: the same call to a configured target runs (above)."""
    headers = {"Authorization": f"Bearer {HOOKS_TOKEN}"}
    attempts = [
        {"message": "Post this", "deliver": {"channel": "telegram", "to": "999"}},
        {"message": "Post this", "deliver": {"channel": "slack", "to": "C0OTHER"}},
        {"message": "Post this", "deliver": "owner-dm"},
        {"message": "Post this", "session_key": "main:telegram:4242"},
    ]
    for body in attempts:
        response = httpx.post(f"{services.url}/hooks/agent", json=body, headers=headers, timeout=30)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] in ("unknown_target", "session_key_not_hook")
        assert "C0OTHER" not in response.text and "999" not in response.text
    settle(services.nats_url)
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    assert llm.calls == []
    assert slack.posts == [] and telegram.sent == []


async def stored_parts(url: str) -> list[tuple[str, messages_pb2.OutboundMessage]]:
    nc = await nats.connect(url)
    try:
        return await outbound_parts(nc.jetstream())
    finally:
        await nc.close()
