"""The block chunker: properties over many generated replies, and the break preferences."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from switchboard_agent.outbound.chunker import chunk_text

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
WORDS = ["alpha", "beta", "gamma", "delta", "x", "to", "be", "naïve", "émoji🙂", "a.b", "(see)"]
SIZES = [(0, 40), (10, 60), (50, 120), (300, 1000), (1000, 1000)]


def _fence_lines(part: str) -> list[tuple[str, str]]:
    """(marker, info) of each fence line of ``part``, by an independent little parser."""
    out: list[tuple[str, str]] = []
    open_marker = ""
    for line in part.split("\n"):
        m = FENCE.match(line)
        if not m:
            continue
        marker, info = m.group(1), m.group(2).strip()
        if not open_marker:
            if marker[0] == "`" and "`" in info:
                continue
            open_marker = marker
            out.append((marker, info))
        elif marker[0] == open_marker[0] and len(marker) >= len(open_marker) and not info:
            open_marker = ""
            out.append((marker, ""))
    return out


def balanced(part: str) -> bool:
    return len(_fence_lines(part)) % 2 == 0


def restore(text: str, parts: list[str]) -> None:
    """Assert the content guarantee: some choice of inserted fence lines (a closing line ending a
    part exactly when the next part starts with a reopening line; the last part may close an
    unclosed fence) leaves parts that occur in ``text`` in order, separated only by whitespace,
    and cover all of its non-whitespace."""
    assert _match(text, parts, 0, 0, False), parts


def _match(text: str, parts: list[str], i: int, pos: int, reopened: bool) -> bool:
    if i == len(parts):
        return not reopened and not text[pos:].strip()
    core = parts[i]
    if reopened:
        first, _, core = core.partition("\n")
        if not FENCE.match(first):
            return False
    closed = re.sub(r"\n(`{3,}|~{3,})$", "", core)
    options = [(core, False)] + ([(closed, True)] if closed != core else [])
    for body, inserted in options:
        at = text.find(body, pos)
        if at < 0 or text[pos:at].strip():
            continue
        last = i == len(parts) - 1
        if inserted and last:
            if not text[at + len(body) :].strip():
                return True
            continue
        if _match(text, parts, i + 1, at + len(body), inserted):
            return True
    return False


def gen_text(rng: random.Random) -> str:
    blocks: list[str] = []
    for _ in range(rng.randint(0, 12)):
        kind = rng.random()
        if kind < 0.25:
            marker = rng.choice(["```", "```", "~~~", "````"])
            info = rng.choice(["", "python", "js title=x.js", "sh"])
            lines = [
                " " * rng.choice([0, 0, 4]) + " ".join(rng.choices(WORDS, k=rng.randint(0, 9)))
                for _ in range(rng.randint(0, 30))
            ]
            closed = rng.random() < 0.9
            blocks.append("\n".join([marker + info, *lines, *([marker] if closed else [])]))
            if not closed:
                break
        elif kind < 0.32:
            blocks.append("z" * rng.randint(30, 1500))
        else:
            sentences = []
            for _ in range(rng.randint(1, 12)):
                words = rng.choices(WORDS, k=rng.randint(1, 25))
                sentences.append(" ".join(words) + rng.choice([".", "!", "?", "...", ":", ""]))
            sep = rng.choice([" ", " ", "\n", "  "])
            blocks.append(sep.join(sentences))
    lead = rng.choice(["", "", "\n\n", "  "])
    return lead + rng.choice(["\n\n", "\n", "\n \n\n"]).join(blocks) + rng.choice(["", "\n", " "])


@pytest.mark.parametrize(("min_chars", "max_chars"), SIZES)
def test_properties_over_generated_replies(min_chars: int, max_chars: int) -> None:
    rng = random.Random(f"{min_chars}-{max_chars}")
    split = reopened = 0
    for _ in range(400):
        text = gen_text(rng)
        parts = chunk_text(text, min_chars, max_chars)
        if not text.strip():
            assert parts == []
            continue
        assert parts, text
        for part in parts:
            assert len(part) <= max_chars, (len(part), part)
            assert part.strip() and part == part.rstrip()
            assert balanced(part), part
        restore(text, parts)
        split += len(parts) > 1
        reopened += any(
            FENCE.match(p.rsplit("\n", 1)[-1]) and FENCE.match(q.split("\n", 1)[0])
            for p, q in itertools.pairwise(parts)
        )
        if len(text.strip()) + 8 <= max_chars and balanced(text):
            assert len(parts) == 1 and parts[0].strip() == text.strip()
    assert split > 50 and reopened > 10  # exercised


def test_short_and_empty() -> None:
    assert chunk_text("") == []
    assert chunk_text(" \n\n \t") == []
    assert chunk_text("hello") == ["hello"]
    assert chunk_text("\n\nhi there.\n") == ["hi there."]
    assert chunk_text("x" * 1000) == ["x" * 1000]


def test_prefers_paragraph_then_newline_then_sentence_then_word() -> None:
    para = "a" * 40 + " " + "b" * 20 + ". " + "c" * 10 + "\n" + "d" * 10 + "\n\n" + "e" * 30
    assert chunk_text(para, 20, 100)[0] == para.split("\n\n")[0]
    line = "a" * 40 + ". " + "b" * 10 + "\n" + "c" * 80
    assert chunk_text(line, 20, 100)[0] == "a" * 40 + ". " + "b" * 10
    sentence = "a" * 30 + ". " + "b" * 30 + " " + "c" * 60
    assert chunk_text(sentence, 20, 100)[0] == "a" * 30 + "."
    word = "a" * 30 + " " + "b" * 30 + " " + "c" * 60
    assert chunk_text(word, 20, 100) == ["a" * 30 + " " + "b" * 30, "c" * 60]


def test_breaks_below_min_are_only_a_fallback() -> None:
    text = "short.\n\n" + "w " * 200
    parts = chunk_text(text, 100, 150)
    assert len(parts[0]) >= 100
    assert all(len(p) <= 150 for p in parts)


def test_only_an_unbreakable_token_is_hard_split() -> None:
    text = "see " + "h" * 2500 + " end"
    parts = chunk_text(text, 300, 1000)
    assert parts[0] == "see"
    assert [len(p) for p in parts[1:-1]] == [1000, 1000]
    assert "".join(parts[1:]) == "h" * 2500 + "end" or parts[-1].endswith(" end")
    assert all(len(p) <= 1000 for p in parts)


def test_code_fence_closed_and_reopened_with_its_info_string() -> None:
    code = "\n".join(f"    line {i} = compute({i})" for i in range(60))
    text = "Here is the code:\n\n```python title=x.py\n" + code + "\n```\n\nThat is all."
    parts = chunk_text(text, 300, 500)
    assert len(parts) >= 3
    assert parts[0].startswith("Here is the code:\n\n```python title=x.py\n    line 0 =")
    for part in parts[:-1]:
        assert part.endswith(")\n```")
    for part in parts[1:]:
        assert part.startswith("```python title=x.py\n    line ")
    assert parts[-1].endswith("```\n\nThat is all.")
    assert all(balanced(p) and len(p) <= 500 for p in parts)
    restore(text, parts)


def test_prefers_a_break_outside_a_fence() -> None:
    text = "intro " * 30 + "\n```\n" + "code line\n" * 10 + "```\n" + "outro " * 40
    parts = chunk_text(text, 50, 400)
    assert parts[0].endswith("```") and parts[0].count("```") == 2
    assert balanced(parts[0])


def test_unclosed_fence_is_closed() -> None:
    assert chunk_text("look:\n```sh\nls -la") == ["look:\n```sh\nls -la\n```"]


def test_tilde_and_long_markers() -> None:
    text = "~~~~text\n" + "tilde line ```\n" * 40 + "~~~~\ndone"
    parts = chunk_text(text, 50, 200)
    assert all(p.startswith("~~~~text\n") for p in parts[1:])
    assert all(balanced(p) for p in parts)
    restore(text, parts)


def test_bad_limits() -> None:
    with pytest.raises(ValueError):
        chunk_text("x", 500, 400)
    with pytest.raises(ValueError):
        chunk_text("x", 0, 10)
