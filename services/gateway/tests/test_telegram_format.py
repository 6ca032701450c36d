"""Reply text -> Telegram HTML messages: Markdown-ish markup, escaping, splitting under 4096
characters of visible text without breaking a tag or an entity, every character kept, and
plain text whenever the HTML would be refused. Each message is checked with the HTML rules
Telegram documents (tests/fakes/telegram_wire.py), as the fake Bot API checks it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchboard.v1 import messages_pb2
from switchboard_gateway.channels import telegram_format
from switchboard_gateway.channels.base import Undeliverable
from switchboard_gateway.channels.telegram import TelegramAdapter
from switchboard_gateway.channels.telegram_format import (
    TEXT_LIMIT,
    Piece,
    parse_markdown,
    render,
    to_pieces,
    units,
)
from tests.fakes.telegram_wire import parse, visible_text


def html_of(text: str) -> str:
    [piece] = to_pieces(text)
    assert piece.html is not None
    return piece.html


def shown(text: str) -> str:
    """What the reply's messages show, joined (each checked as Telegram would)."""
    return "".join(visible_text(p.html) if p.html is not None else p.plain for p in to_pieces(text))


@pytest.mark.parametrize(
    ("text", "html"),
    [
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
        ("*it* and _it_", "<i>it</i> and <i>it</i>"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2<i>3</i>4"),
        ("~~gone~~ ~x~", "<s>gone</s> ~x~"),
        ("`a<b> & **c**`", "<code>a&lt;b&gt; &amp; **c**</code>"),
        ("**bold `code` bold**", "<b>bold </b><code>code</code><b> bold</b>"),
        ("# Title ##\ntext", "<b>Title</b>\ntext"),
        ("# C#", "<b>C#</b>"),
        ("\\*not italic\\*", "*not italic*"),
        ("**unclosed and *lonely", "**unclosed and *lonely"),
        ("* item\n* item", "* item\n* item"),
        ('[the "docs"](https://x.org/?a=1&b="2")',
         '<a href="https://x.org/?a=1&amp;b=&quot;2&quot;">the "docs"</a>'),
        ("[x](javascript:alert(1))", "[x](javascript:alert(1))"),
        ("[wiki](https://en.wikipedia.org/wiki/Foo_(bar))",
         '<a href="https://en.wikipedia.org/wiki/Foo_(bar)">wiki</a>'),
        ("```python\nif a < b:\n    **not bold**\n```\nafter",
         '<pre><code class="language-python">if a &lt; b:\n    **not bold**</code></pre>\nafter'),
        ("```\nplain & code\n```", "<pre><code>plain &amp; code</code></pre>"),
        ("```js\nunclosed", '<pre><code class="language-js">unclosed</code></pre>'),
    ],
)  # fmt: skip
def test_markup(text: str, html: str) -> None:
    assert html_of(text) == html
    parse(html)  # Telegram would take it


def test_a_links_url_stays_in_the_plain_text() -> None:
    [piece] = to_pieces("see [the docs](https://example.com/x) now")
    assert piece.plain == "see the docs (https://example.com/x) now"


def test_a_long_reply_is_split_under_the_limit_keeping_every_character() -> None:
    prose = ("Fish & chips <cheap> " * 250).strip()  # 5249 characters, & < > as entities
    code = "\n".join(f"line {i}: if a < b && c > d {{ return; }}" for i in range(120))
    text = f"**{prose}**\n```rust\n{code}\n```\n" + "tail " * 400
    pieces = to_pieces(text)
    assert len(pieces) >= 3
    for piece in pieces:
        assert piece.html is not None
        assert units(visible_text(piece.html)) <= TEXT_LIMIT
        assert visible_text(piece.html) == piece.plain
    expected = f"{prose}\n{code}\n" + "tail " * 400
    assert "".join(p.plain for p in pieces) == expected
    # A tag open at a split is closed and opened again in the next message.
    first, second = pieces[0].html or "", pieces[1].html or ""
    assert first.startswith("<b>Fish") and first.endswith("</b>") and second.startswith("<b>")
    assert any(
        p.html is not None and p.html.startswith('<pre><code class="language-rust">line')
        for p in pieces[1:]
    )


def test_splitting_counts_utf16_units_and_never_splits_a_character() -> None:
    text = "😀" * 5000  # two UTF-16 units each
    pieces = to_pieces(text)
    assert [units(p.plain) for p in pieces] == [4096, 4096, 1808]
    assert "".join(p.plain for p in pieces) == text


def test_a_split_prefers_a_line_break_then_a_space() -> None:
    lines = [f"{i:04d} " + "x" * 94 for i in range(60)]  # 60 lines of 99 characters
    pieces = to_pieces("\n".join(lines))
    assert pieces[0].plain.endswith("\n") and pieces[1].plain.startswith("0040 ")
    words = to_pieces(" ".join(["word"] * 2000))
    assert words[0].plain.endswith(" ") and words[1].plain.startswith("word")


MARKUP = st.sampled_from(["**", "*", "_", "__", "`", "```", "~~", "[", "](", ")", "#", "\\"])
PLAIN = st.text(alphabet=st.sampled_from(list("ab &<>\"'\n😀é")), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(PLAIN, MARKUP, st.just("https://x.org/")), max_size=40), st.integers(8, 200)
)
def test_any_text_gives_valid_messages_under_the_limit(chunks: list[str], limit: int) -> None:
    text = "".join(chunks)
    pieces = render(parse_markdown(text), limit)
    for piece in pieces:
        assert piece.html is not None
        assert units(piece.plain) <= limit
        assert piece.plain.strip()
        assert units(visible_text(piece.html)) <= limit  # parses as Telegram parses
    spans = "".join(s.text for s in parse_markdown(text))
    joined = "".join(p.plain for p in pieces)
    # Nothing but whitespace at a split may go (Telegram trims a message's ends anyway).
    assert re.sub(r"\s", "", joined) == re.sub(r"\s", "", spans)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab &<>\n😀")), max_size=400), st.integers(8, 64))
def test_text_without_markup_is_kept_whole(text: str, limit: int) -> None:
    pieces = render(parse_markdown(text), limit)
    joined = "".join(p.plain for p in pieces)
    assert re.sub(r"\s", "", joined) == re.sub(r"\s", "", text)
    for piece in pieces:
        assert piece.plain in text and units(piece.plain) <= limit


def test_html_that_would_be_refused_goes_as_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = [Piece("<b>bold & <i>", "bold & ")]
    monkeypatch.setattr(telegram_format, "render", lambda spans, limit=TEXT_LIMIT: broken)
    assert to_pieces("**bold** & *x") == [Piece(None, "**bold** & *x")]

    def fails(text: str) -> list[object]:
        raise IndexError("a formatting bug")

    monkeypatch.setattr(telegram_format, "parse_markdown", fails)
    assert to_pieces("a < b") == [Piece(None, "a < b")]


# --- the adapter's platform messages ----------------------------------------------------------


def part(text: str, **fields: object) -> messages_pb2.OutboundMessage:
    values: dict[str, object] = {
        "chat": messages_pb2.ChatRef(id="-1001", type="group"),
        "text": text,
    }
    return messages_pb2.OutboundMessage(**{**values, **fields})  # type: ignore[arg-type]


ADAPTER = TelegramAdapter("1:x", "s" * 30)


def test_a_part_replies_in_its_topic_with_its_first_message_only() -> None:
    first, second = ADAPTER.format(part("x" * 5000, reply_to="-1001:55:edit:9", thread_id="12"))
    assert first.payload["method"] == "sendMessage"
    params = first.payload["params"]
    assert params["chat_id"] == -1001 and params["parse_mode"] == "HTML"
    assert params["message_thread_id"] == 12
    assert params["reply_parameters"] == {"message_id": 55, "allow_sending_without_reply": True}
    assert "reply_parameters" not in second.payload["params"]
    assert second.payload["params"]["message_thread_id"] == 12
    later = ADAPTER.format(part("more", part=1, reply_to="-1001:55"))
    assert "reply_parameters" not in later[0].payload["params"]
    # A reply_to in another chat, or a thread id that is no topic, is left out.
    [other] = ADAPTER.format(part("x", reply_to="42:55", thread_id="-1001:55"))
    assert {"reply_parameters", "message_thread_id"}.isdisjoint(other.payload["params"])


def test_media_references_and_links() -> None:
    media = [
        "https://example.com/a_b_c.png",
        "telegram:photo:AgAD-1?mime=image%2Fjpeg",
        "telegram:document:BQAC-2",
        "file:///etc/passwd",
    ]
    sent = ADAPTER.format(part("here", media=media))
    assert [m.payload["method"] for m in sent] == ["sendMessage", "sendPhoto", "sendDocument"]
    text = sent[0].payload["params"]["text"]
    url = "https://example.com/a_b_c.png"
    assert text == f'here\n<a href="{url}">{url}</a>'
    assert sent[1].payload["params"] == {"chat_id": -1001, "photo": "AgAD-1"}
    assert sent[2].payload["params"] == {"chat_id": -1001, "document": "BQAC-2"}


def test_nothing_to_send_and_no_chat() -> None:
    assert ADAPTER.format(part("  \n ")) == []
    with pytest.raises(Undeliverable):
        ADAPTER.format(part("hi", chat=messages_pb2.ChatRef(id="not a chat")))
