"""Slack replies: the agent's Markdown as mrkdwn, split at Slack's text limit keeping every
character (and code blocks balanced), posted in the right thread by our slack_sdk client to the
fake Slack Web API over HTTP, and its failures mapped to retry-later or undeliverable."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.base import PlatformMessage, RetryLater, Undeliverable
from switchboard_gateway.channels.slack import SlackAdapter
from switchboard_gateway.channels.slack_format import (
    TEXT_LIMIT,
    from_mrkdwn,
    split_mrkdwn,
    to_mrkdwn,
)
from switchboard_gateway.channels.slack_format import escape as slack_escape
from tests.fakes.slack import FakeSlack

from .gateway_harness import absent_address


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def adapter(slack: FakeSlack) -> SlackAdapter:
    adapter = SlackAdapter(slack.token, "signing-secret", slack.base_url)
    await adapter.start(None)
    return adapter


def part(
    text: str, chat: str = "C1", thread_id: str = "", **fields: object
) -> messages_pb2.OutboundMessage:
    return messages_pb2.OutboundMessage(
        channel="slack",
        account="default",
        chat=messages_pb2.ChatRef(id=chat, type="group"),
        thread_id=thread_id,
        text=text,
        **fields,  # type: ignore[arg-type]
    )


def test_markdown_becomes_mrkdwn() -> None:
    cases = {
        "**bold** and *italic* and _also_": "*bold* and _italic_ and _also_",
        "~~gone~~ 2 * 3 * 4": "~gone~ 2 * 3 * 4",
        "[the docs](https://x.io/a?b=1&c=2) now": "<https://x.io/a?b=1&amp;c=2|the docs> now",
        "[a <b>](https://x.io/p|q)": "<https://x.io/p%7Cq|a &lt;b&gt;>",
        "<https://x.io> for <@U123ABC>": "<https://x.io> for <@U123ABC>",
        "a & b < c > d <!channel>": "a &amp; b &lt; c &gt; d &lt;!channel&gt;",
        "`a<b **c**` stays code": "`a&lt;b **c**` stays code",
        "## Heading **one**": "*Heading one*",
        "- first\n* second": "• first\n• second",
        "snake_case and __init__.py": "snake_case and __init__.py",
    }
    for markdown, mrkdwn in cases.items():
        assert to_mrkdwn(markdown) == mrkdwn, markdown


def test_code_fences_are_kept_and_their_content_is_not_formatted() -> None:
    markdown = "Run:\n```python\nif a < b and **c**:\n    x = [t](u)\n```\n**done**"
    assert to_mrkdwn(markdown) == ("Run:\n```\nif a &lt; b and **c**:\n    x = [t](u)\n```\n*done*")


def test_inbound_markup_becomes_plain_text() -> None:
    text = "<@U0BOT> ask <@U9|bob> in <#C1|general> about <https://x.io|this> &amp; <!here>"
    assert (
        from_mrkdwn(text, {"U0BOT"}) == "ask <@U9> in #general about [this](https://x.io) & @here"
    )


def assert_pieces_of(text: str, pieces: list[str]) -> None:
    """Each piece is the next slice of ``text``, apart from the fences the split adds: a piece
    that leaves a code block open ends with a closing fence and the next starts "```\n"."""
    pos, reopen = 0, False
    for piece in pieces:
        if reopen:
            assert piece.startswith("```\n"), piece[:20]
            piece = piece[4:]
        k = 0
        while k < len(piece) and pos + k < len(text) and piece[k] == text[pos + k]:
            k += 1
        added = piece[k:]
        assert added in ("", "```", "\n```"), added[:20]
        reopen = added != ""
        pos += k
    assert pos == len(text)


def fences_balanced(piece: str) -> bool:
    return sum(1 for line in piece.split("\n") if line == "```") % 2 == 0


def test_split_keeps_every_character_and_balances_fences() -> None:
    prose = " ".join(f"word{i} &amp; more" for i in range(300))
    code = "\n".join(f"line {i} &lt; {i + 1}" for i in range(200))
    text = f"{prose}\n```\n{code}\n```\n{prose}"
    pieces = split_mrkdwn(text, 500)
    assert len(pieces) > 10
    assert all(len(p) <= 500 for p in pieces)
    assert all(fences_balanced(p) for p in pieces)
    assert not any(re.search(r"&[a-z]{0,2}$", p) for p in pieces)  # no entity cut in two
    assert_pieces_of(text, pieces)
    assert any(p.endswith("```") and p.startswith("```") for p in pieces)  # a split block
    unbroken = "x" * 1200  # no place to break: cut at the limit
    assert split_mrkdwn(unbroken, 500) == ["x" * 500, "x" * 500, "x" * 200]
    assert split_mrkdwn("short", 500) == ["short"]


def test_format_posts_in_the_thread_and_splits_at_slacks_limit(adapter: SlackAdapter) -> None:
    [message] = adapter.format(part("**hi**", thread_id="1700000000.000100"))
    assert message.payload == {"channel": "C1", "text": "*hi*", "thread_ts": "1700000000.000100"}
    [top_level] = adapter.format(part("hi", chat="D1"))
    assert top_level.payload == {"channel": "D1", "text": "hi"}
    # a followup reply names the inbound message id (<channel>:<ts>) as the thread
    [followup] = adapter.format(part("hi", thread_id="C1:1700000000.000200"))
    assert followup.payload["thread_ts"] == "1700000000.000200"
    [with_media] = adapter.format(part("see", media=["https://x.io/a.png", "sha256:abc"]))
    assert with_media.payload["text"] == "see\n<https://x.io/a.png>"
    long = "&" * (TEXT_LIMIT // 2)  # 5 characters each once escaped
    messages = adapter.format(part(long, thread_id="1700000000.000300"))
    assert len(messages) == 3
    assert "".join(m.payload["text"] for m in messages) == slack_escape(long)
    assert all(len(m.payload["text"]) <= TEXT_LIMIT for m in messages)
    assert all(m.payload["thread_ts"] == "1700000000.000300" for m in messages)
    with pytest.raises(Undeliverable):
        adapter.format(part("hi", chat=""))


async def test_send_posts_with_the_bot_token(adapter: SlackAdapter, slack: FakeSlack) -> None:
    for message in adapter.format(part("**hi** <there>", thread_id="1700000000.000100")):
        await adapter.send("default", message)
    [post] = slack.posts
    assert (post.channel, post.text, post.thread_ts, post.mrkdwn) == (
        "C1",
        "*hi* &lt;there&gt;",
        "1700000000.000100",
        True,
    )
    with pytest.raises(Undeliverable, match="no Slack account"):
        await adapter.send("other", PlatformMessage({"channel": "C1", "text": "x"}))


async def test_send_errors_are_mapped(adapter: SlackAdapter, slack: FakeSlack) -> None:
    message = adapter.format(part("hello"))[0]
    slack.fail_next("ratelimited", status=429, retry_after=7)
    with pytest.raises(RetryLater) as limited:
        await adapter.send("default", message)
    assert (limited.value.reason, limited.value.retry_after_s) == ("slack ratelimited", 7.0)
    slack.fail_next("internal_error", 2, status=500)
    delays = []
    for _ in range(2):
        with pytest.raises(RetryLater) as busy:
            await adapter.send("default", message)
        delays.append(busy.value.retry_after_s)
    assert delays == [1.0, 2.0]  # backing off while Slack fails
    for error in ("channel_not_found", "not_in_channel", "is_archived"):
        slack.fail_next(error)
        with pytest.raises(Undeliverable, match=error):
            await adapter.send("default", message)
    await adapter.send("default", message)
    assert [p.text for p in slack.posts] == ["hello"]
    slack.fail_next("internal_error", status=500)
    with pytest.raises(RetryLater) as again:
        await adapter.send("default", message)
    assert again.value.retry_after_s == 1.0  # the success reset the backoff


async def test_a_refused_token_is_undeliverable(slack: FakeSlack) -> None:
    wrong = SlackAdapter("xoxb-wrong", "signing-secret", slack.base_url)
    with pytest.raises(Undeliverable, match="invalid_auth") as refused:
        await wrong.send("default", PlatformMessage({"channel": "C1", "text": "x"}))
    assert "xoxb-wrong" not in str(refused.value)
    assert slack.posts == []


async def test_slack_out_of_reach_is_retried_later() -> None:
    with absent_address() as address:
        adapter = SlackAdapter("xoxb-x", "signing-secret", f"http://{address}/api/")
        await adapter.start(None)  # a warning, not a failure: events name the bot too
        with pytest.raises(RetryLater, match="slack unreachable"):
            await adapter.send("default", PlatformMessage({"channel": "C1", "text": "x"}))


def test_the_fake_takes_form_and_json_bodies_as_slack_does(slack: FakeSlack) -> None:
    url = slack.base_url + "chat.postMessage"
    auth = {"Authorization": f"Bearer {slack.token}"}
    assert httpx.post(url, data={"channel": "C1", "text": "form"}, headers=auth).json()["ok"]
    assert httpx.post(url, data={"channel": "C1", "text": "field", "token": slack.token}).json()[
        "ok"
    ]
    answer = httpx.post(
        url, json={"channel": "C2", "text": "json", "thread_ts": "1.2"}, headers=auth
    )
    assert answer.json()["message"]["thread_ts"] == "1.2"
    assert [(p.channel, p.text, p.encoding) for p in slack.posts] == [
        ("C1", "form", "form"),
        ("C1", "field", "form"),
        ("C2", "json", "json"),
    ]
    assert slack.posts_in("C2", "1.2")[0].ts == answer.json()["ts"]
    refused = httpx.post(
        url, json={"channel": "C1", "text": "x"}, headers={"Authorization": "Bearer xoxb-no"}
    )
    assert (refused.status_code, refused.json()) == (200, {"ok": False, "error": "invalid_auth"})
    missing = httpx.post(url, json={"channel": "C1", "text": "x"})
    assert missing.json() == {"ok": False, "error": "not_authed"}
    assert httpx.post(url, json={"channel": "C1"}, headers=auth).json()["error"] == "no_text"
