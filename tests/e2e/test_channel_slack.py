"""Slack end to end: every service as a real process, the gateway configured by SB_SLACK_*
against the fake Slack Web API, the agent against the fake model (a tool call, then text).
A signed app_mention POSTed to the gateway's Events API URL is answered by our slack_sdk
client with one chat.postMessage in the mention's channel and thread, however often Slack
retries the event; a 429 with Retry-After is waited out before the reply is posted again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import nats
import pytest

from tests.fakes.llm import FakeLLM, tool_then_text
from tests.fakes.slack import FakeSlack, Post, SlackEvents
from tests.lanes.pipeline import wait_settled
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
        "SB_LOG_LEVEL": "INFO",
        "SB_SLACK_GROUPS": '["C1"]',  # groups are closed by default (docs/trust.md)
    }
    with with_fake_model(tmp_path, nats_url, database_url, tool_then_text(), env) as procs:
        yield procs


def deliver(
    services: ServiceProcesses, events: SlackEvents, envelope: dict, retry_num: int | None = None
) -> None:
    """POST a signed Events API call (signed now, with the real clock) as Slack does."""
    body, headers = events.request(envelope, retry_num=retry_num)
    response = httpx.post(services.url + HOOK, content=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json() == {"ok": True}


async def all_delivered(nats_url: str, timeout: float = 60.0) -> None:
    """Until every message so far is routed and answered, and OUTBOUND (a work queue) is empty:
    every reply part sent and acknowledged (a part waiting out a 429 is still there)."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await wait_settled(js, timeout)
        deadline = time.monotonic() + timeout
        while (await js.stream_info("OUTBOUND")).state.messages:
            assert time.monotonic() < deadline, "OUTBOUND never emptied"
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


def test_a_mention_is_answered_once_in_its_thread_and_a_429_is_waited_out(
    services: ServiceProcesses, slack: FakeSlack, events: SlackEvents
) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    nats_url = services.env["SB_NATS_URL"]
    assert [c.method for c in slack.calls] == ["auth.test"]  # the gateway learned its bot id

    # A mention in a channel, then Slack's retries of it (as if our 200 came too late).
    mention = events.app_mention("U1", f"<@{BOT}> what time is it?", "C1")
    envelope = events.envelope(mention)
    deliver(services, events, envelope)
    deliver(services, events, envelope, retry_num=1)
    [post] = slack.wait_for_posts(1, timeout=60)
    deliver(services, events, envelope, retry_num=2)  # after the reply went out
    asyncio.run(all_delivered(nats_url))
    assert slack.posts == [post]  # exactly once
    assert (post.channel, post.thread_ts) == ("C1", mention["ts"])  # in a thread on the mention
    assert post.text.startswith("Tool said: ") and post.mrkdwn is True
    assert len(llm.calls) == 2  # one run: the tool call, then the text
    assert llm.calls[0].request.last_user_text.endswith("what time is it?")

    # A DM while Slack rate-limits the bot: the reply waits out Retry-After, then goes once.
    slack.fail_next("ratelimited", status=429, retry_after=2)
    dm = events.message("U2", "and the date?", "D2")
    deliver(services, events, events.envelope(dm))
    posts = slack.wait_for_posts(2, timeout=60)
    asyncio.run(all_delivered(nats_url))
    assert slack.posts == posts
    assert [(p.channel, p.thread_ts) for p in posts[1:]] == [("D2", None)]
    sends = [c for c in slack.calls if c.method == "chat.postMessage"][1:]
    assert [(c.status, c.error) for c in sends] == [(429, "ratelimited"), (200, "")]
    limited, sent = sends
    assert sent.at - limited.at >= 1.95, "the retry came before Retry-After passed"
    assert isinstance(posts[1], Post) and posts[1].text.startswith("Tool said: ")
