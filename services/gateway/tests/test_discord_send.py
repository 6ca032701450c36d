"""Discord replies: split at 2000 characters without losing one and with balanced code fences,
sent to the fake Discord REST API over real HTTP (an interaction's response edit and follow-ups,
or channel messages), and Discord's failures mapped to retry-later or undeliverable."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator

import pytest

from switchboard.v1 import messages_pb2
from switchboard_gateway.channels.base import RetryLater, Undeliverable
from switchboard_gateway.channels.discord import DiscordAdapter
from switchboard_gateway.channels.discord_format import TEXT_LIMIT, fence_after, split_content
from tests.fakes.discord import FakeDiscord

CHANNEL = "4200000000000000001"
GUILD = "4400000000000000001"


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord() as fake:
        yield fake


@pytest.fixture
async def adapter(discord: FakeDiscord) -> AsyncIterator[DiscordAdapter]:
    adapter = DiscordAdapter(discord.token, discord.interactions.public_key, discord.base_url)
    await adapter.start()
    yield adapter
    await adapter.close()


def deferred(discord: FakeDiscord) -> dict[str, str]:
    """A slash command answered with a deferred response: the reply_context of its reply."""
    command = discord.interactions.slash_command("hi", channel_id=CHANNEL, guild_id=GUILD)
    discord.record_response(command["token"], {"type": 5})
    return {"interaction_token": command["token"], "application_id": command["application_id"]}


def part(text: str, index: int = 0, **fields: object) -> messages_pb2.OutboundMessage:
    fields.setdefault("chat", messages_pb2.ChatRef(id=CHANNEL, type="group"))
    return messages_pb2.OutboundMessage(
        run_id="run-1",
        part=index,
        parts=3,
        channel="discord",
        account="default",
        text=text,
        **fields,  # type: ignore[arg-type]
    )


async def deliver(adapter: DiscordAdapter, out: messages_pb2.OutboundMessage) -> None:
    for message in adapter.format(out):
        await adapter.send("default", message)


def cores(parts: list[str], text: str) -> str:
    """The parts without the fence lines added at the cuts, joined (to compare with ``text``,
    whose code block state at each cut tells which lines were added)."""
    rebuilt = ""
    for i, piece in enumerate(parts):
        at = len(rebuilt)
        fence = fence_after(text[:at], None)  # the block the text is inside here
        if fence is not None:  # a continued block starts with its opening line again
            assert piece.startswith(fence + "\n"), piece[:40]
            piece = piece[len(fence) + 1 :]
        last = i + 1 == len(parts)
        if text.startswith(piece, at) and (
            last or fence_after(text[: at + len(piece)], None) is None
        ):
            rebuilt += piece  # the text as it is
            continue
        for added in ("```", "\n```"):  # the block was closed at the cut
            core = piece[: -len(added)]
            if (
                piece.endswith(added)
                and text.startswith(core, at)
                and fence_after(text[: at + len(core)], None) is not None
            ):
                break
        else:
            raise AssertionError(f"part {i} is not the text's next slice: {piece[:40]!r}")
        rebuilt += core
    return rebuilt


def test_short_text_is_one_message_as_written() -> None:
    text = "**bold** _it_ ~~s~~ `code` > quote\n- item\n## Head\n[link](https://x.y) @everyone <@1>"
    assert split_content(text) == [text]  # nothing escaped: Discord renders it


def test_long_prose_is_split_at_breaks_and_keeps_every_character() -> None:
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "épsilon", "ζῆτα", "🙂", "x" * 30]
    text = ""
    while len(text) < 9000:
        text += " ".join(rng.choice(words) for _ in range(rng.randint(3, 40)))
        text += rng.choice([". ", ".\n", ".\n\n"])
    parts = split_content(text)
    assert len(parts) >= 5
    assert all(len(p) <= TEXT_LIMIT for p in parts)
    assert "".join(parts) == text  # no code block: the parts are the text, cut
    assert all(p.endswith((" ", "\n")) for p in parts[:-1])  # cut at a break, not in a word


def test_a_word_longer_than_a_message_is_cut_anyway() -> None:
    text = "a" * 4500
    assert split_content(text) == ["a" * 2000, "a" * 2000, "a" * 500]


def test_a_split_inside_a_code_block_closes_and_reopens_it() -> None:
    code = "".join(f"print({i})  # line {i}\n" for i in range(200))  # ~4.6k characters
    text = f"Here it is:\n\n```python\n{code}```\n\nDone."
    parts = split_content(text)
    assert len(parts) == 3 and all(len(p) <= TEXT_LIMIT for p in parts)
    assert parts[0].startswith("Here it is:\n\n```python\n") and parts[0].endswith("\n```")
    assert parts[1].startswith("```python\nprint(") and parts[1].endswith("\n```")
    assert parts[2].startswith("```python\nprint(") and parts[2].endswith("```\n\nDone.")
    for piece in parts:  # each message's fences are balanced
        assert fence_after(piece, None) is None, piece[:40]
    # Without the fence lines added at the cuts, the parts are the text: nothing lost.
    core = [parts[0][: -len("```")], *(p[len("```python\n") :] for p in parts[1:])]
    core[1] = core[1][: -len("```")]
    assert "".join(core) == text


def test_random_markdown_with_code_blocks_keeps_every_character() -> None:
    rng = random.Random(11)
    for _ in range(30):
        blocks = []
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.5:
                lang = rng.choice(["", "python", "js", "a-very-long-language-name"])
                body = "".join(f"{'x' * rng.randint(0, 120)}\n" for _ in range(rng.randint(1, 60)))
                blocks.append(f"```{lang}\n{body}```")
            else:
                blocks.append(" ".join("word" for _ in range(rng.randint(1, 500))))
        text = "\n\n".join(blocks)
        parts = split_content(text)
        assert all(len(p) <= TEXT_LIMIT for p in parts)
        assert cores(parts, text) == text
        assert all(fence_after(p, None) is None for p in parts)


async def test_an_interaction_reply_edits_the_deferred_response_then_follows_up(
    adapter: DiscordAdapter, discord: FakeDiscord
) -> None:
    context = deferred(discord)
    token = context["interaction_token"]
    long = "word " * 700  # 3500 characters: two messages
    await deliver(adapter, part(long, 0, reply_context=context))
    await deliver(adapter, part("the end", 1, reply_context=context))
    interaction = discord.interaction(token)
    assert interaction.original is not None and interaction.original.edits == 1
    contents = [interaction.original.content, *(m.content for m in interaction.followups)]
    assert contents == [*split_content(long), "the end"]
    assert interaction.original.allowed_mentions == {"parse": []}
    assert all(m.allowed_mentions == {"parse": []} for m in interaction.followups)
    hook_calls = [c for c in discord.calls if c.route in ("original", "followup")]
    assert [(c.method, c.route, c.status) for c in hook_calls] == [
        ("PATCH", "original", 200),
        ("POST", "followup", 200),
        ("POST", "followup", 200),
    ]
    assert all(c.authorization == "" for c in hook_calls)  # no bot token on webhooks
    assert len(discord.messages_in(CHANNEL)) == 3  # the response and two follow-ups


async def test_a_retried_first_part_edits_the_response_again_and_posts_nothing(
    adapter: DiscordAdapter, discord: FakeDiscord
) -> None:
    context = deferred(discord)
    for _ in range(2):  # the first attempt's answer was lost, say
        await deliver(adapter, part("It is noon.", 0, reply_context=context))
    interaction = discord.interaction(context["interaction_token"])
    assert interaction.original is not None
    assert (interaction.original.content, interaction.original.edits) == ("It is noon.", 2)
    assert interaction.followups == []
    assert [m.content for m in discord.messages_in(CHANNEL)] == ["It is noon."]


async def test_a_channel_message_replies_with_a_reference_and_a_nonce(
    adapter: DiscordAdapter, discord: FakeDiscord
) -> None:
    out = part("hello <@123> @everyone", reply_to="4600000000000000001")
    await deliver(adapter, out)
    await deliver(adapter, out)  # a retried send: Discord's enforce_nonce drops it
    [message] = discord.messages_in(CHANNEL)
    assert message.via == "bot" and message.content == "hello <@123> @everyone"
    assert message.allowed_mentions == {"parse": []}
    assert message.message_reference == {
        "message_id": "4600000000000000001",
        "fail_if_not_exists": False,
    }
    assert [c.authorization for c in discord.calls] == [f"Bot {discord.token}"] * 2
    await adapter.typing("default", messages_pb2.ChatRef(id=CHANNEL), "")
    assert discord.calls[-1].route == "typing" and discord.calls[-1].status == 204


async def test_rate_limits_and_server_errors_ask_to_retry(
    adapter: DiscordAdapter, discord: FakeDiscord
) -> None:
    [message] = adapter.format(part("hi"))
    discord.fail_next(429, retry_after=2.5, global_=True)
    with pytest.raises(RetryLater) as limited:
        await adapter.send("default", message)
    assert limited.value.retry_after_s == 2.5  # the body's float, not the header's ceiling
    discord.fail_next(500, n=2)
    delays = []
    for _ in range(2):
        with pytest.raises(RetryLater) as failed:
            await adapter.send("default", message)
        delays.append(failed.value.retry_after_s)
    assert delays == [1.0, 2.0]  # backing off
    await adapter.send("default", message)
    assert len(discord.messages_in(CHANNEL)) == 1


async def test_an_unreachable_discord_is_retried(discord: FakeDiscord) -> None:
    adapter = DiscordAdapter(discord.token, discord.interactions.public_key, discord.base_url)
    await adapter.start()
    [message] = adapter.format(part("hi"))
    discord.stop()
    try:
        with pytest.raises(RetryLater, match="unreachable") as failed:
            await adapter.send("default", message)
        assert discord.token not in str(failed.value.reason)
    finally:
        await adapter.close()


async def test_refusals_are_undeliverable_and_never_show_the_token(discord: FakeDiscord) -> None:
    adapter = DiscordAdapter(discord.token, discord.interactions.public_key, discord.base_url)
    await adapter.start()
    try:
        context = deferred(discord)
        cases: list[tuple[messages_pb2.OutboundMessage, str]] = [
            (part("hi", chat=messages_pb2.ChatRef(id="4700000000000000001")), "Unknown Channel"),
            (part("hi", reply_context=context), "expired"),
            (part("hi", reply_context={**context, "interaction_token": "unknown"}), "10015"),
        ]
        discord.channels = {CHANNEL}
        discord.expire(context["interaction_token"])
        for out, why in cases:
            with pytest.raises(Undeliverable, match=why) as refused:
                await deliver(adapter, out)
            assert discord.token not in str(refused.value)
            assert context["interaction_token"] not in str(refused.value)
        discord.fail_next(403, route="channel")
        with pytest.raises(Undeliverable, match="Missing Access"):
            await deliver(adapter, part("hi"))
        with pytest.raises(Undeliverable):
            adapter.format(part("hi", reply_context={"interaction_token": "../x"}))
        with pytest.raises(Undeliverable):
            adapter.format(part("hi", chat=messages_pb2.ChatRef(id="general")))
    finally:
        await adapter.close()
    wrong = DiscordAdapter("not-the-token", discord.interactions.public_key, discord.base_url)
    await wrong.start()
    try:
        with pytest.raises(Undeliverable, match="bot token"):
            await deliver(wrong, part("hi"))
    finally:
        await wrong.close()
