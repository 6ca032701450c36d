"""Exact parts of replies at the edges of the chunker's rules (docs/architecture.md): a
leading indentation kept or dropped, a break right at ``min_chars`` or ``max_chars``, an info
string holding a backtick (inline code, not a fence), a fence reopened with a long info string,
tilde and longer markers, a reply ending inside a fence. The properties of test_chunker.py say
a split is valid; these say it is the one the rules pick (paragraph > newline > sentence > word,
outside fences first), and each is checked against those properties too."""

# ruff: noqa: E501 (the replies below are data: one per line)
from __future__ import annotations

import pytest

from switchboard_agent.outbound.chunker import chunk_text

from .test_chunker import balanced, restore

CASES: list[tuple[str, int, int, list[str]]] = [
    ("", 0, 40, []),
    (" x y", 0, 40, ["x y"]),
    ("\n    x = 1", 0, 40, ["    x = 1"]),
    ("``` py`x\ncode\n", 0, 40, ["``` py`x\ncode"]),
    (
        "p1 p1 p1 p1 p1 p1 p1 p1 p1 p1 \n\np2 p2 p2 p2 p2 p2 p2 p2 p2 p2 ",
        40,
        40,
        ["p1 p1 p1 p1 p1 p1 p1 p1 p1 p1 \n\np2 p2 p2", "p2 p2 p2 p2 p2 p2 p2"],
    ),
    (
        "```\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\n```",
        5,
        45,
        [
            "```\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\n```",
            "```\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\n```",
        ],
    ),
    (
        "```\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\n```",
        40,
        40,
        [
            "```\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\n```",
            "```\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\nx\n```",
        ],
    ),
    (
        "~~~\nt t t t t t t t t t t t t t t t t t t t t t t t t t t t t t \n~~~~\nafter",
        0,
        40,
        [
            "~~~\nt t t t t t t t t t t t t t t t\n~~~",
            "~~~\nt t t t t t t t t t t t t t\n~~~",
            "~~~\n~~~~\nafter",
        ],
    ),
    (
        "~~~\nt t t t t t t t t t t t t t t t t t t t t t t t t t t t t t \n~~~~\nafter",
        0,
        41,
        [
            "~~~\nt t t t t t t t t t t t t t t t t\n~~~",
            "~~~\nt t t t t t t t t t t t t \n~~~~\nafter",
        ],
    ),
    (
        "```\ncode ```\ncode ```\ncode ```\ncode ```\ncode ```\ncode ```\ncode ```\ncode \n```\ntail tail tail tail tail tail tail tail ",
        0,
        40,
        [
            "```\ncode ```\ncode ```\ncode ```\n```",
            "```\ncode ```\ncode ```\ncode ```\n```",
            "```\ncode ```\ncode \n```",
            "tail tail tail tail tail tail tail tail",
        ],
    ),
    (
        "word word word word word word word word word word word word \n         indented \n         indented \n         indented \n         indented ",
        0,
        40,
        [
            "word word word word word word word word",
            "word word word word \n         indented",
            "         indented \n         indented",
            "         indented",
        ],
    ),
    (
        "  ```\n    naïve a.b be delta\n```\n```sh\nbeta delta beta\nnaïve\n    \n    delta alpha be beta beta be a.b a.b\nbeta émoji🙂 be naïve alpha be\nalpha delta\n``` ",
        0,
        40,
        [
            "```\n    naïve a.b be delta\n```",
            "```sh\nbeta delta beta\nnaïve\n```",
            "```sh\n    delta alpha be beta beta\n```",
            "```sh\nbe a.b a.b\n```",
            "```sh\nbeta émoji🙂 be naïve alpha be\n```",
            "```sh\nalpha delta\n```",
        ],
    ),
    (
        "\n\n```python\n    delta\ndelta naïve a.b beta (see) be\ngamma naïve émoji🙂 émoji🙂 delta émoji🙂 (see) x delta\n    (see) beta alpha to naïve émoji🙂 delta (see)\n```\n \n\nbe.\nto gamma!",
        5,
        45,
        [
            "```python\n    delta\n```",
            "```pyt\ndelta naïve a.b beta (see) be\n```",
            "```pyt\ngamma naïve émoji🙂 émoji🙂 delta\n```",
            "```pyt\némoji🙂 (see) x delta\n```",
            "```pyt\n    (see) beta alpha to naïve\n```",
            "```pyt\némoji🙂 delta (see)\n```",
            "be.\nto gamma!",
        ],
    ),
    (
        "\n\n````js title=x.js\nalpha émoji🙂 naïve delta\n    (see) to a.b be to\nto a.b a.b a.b to beta naïve a.b\n    a.b to x naïve delta x (see) to alpha\n\ngamma gamma gamma a.b x\n\n```` ",
        40,
        40,
        [
            "````js title=x.js\nalpha émoji🙂\n````",
            "````\nnaïve delta\n    (see) to a.b\n````",
            "````\nbe to\nto a.b a.b a.b to beta\n````",
            "````\nnaïve a.b\n    a.b to x naïve\n````",
            "````\ndelta x (see) to alpha\n\ngamma\n````",
            "````\ngamma gamma a.b x\n\n````",
        ],
    ),
    (
        "\n\n~~~\ngamma be a.b émoji🙂 x\ngamma gamma émoji🙂 to be delta naïve to\ngamma\nx x (see) a.b a.b alpha\nnaïve a.b to be alpha x\n    (see) gamma beta beta to naïve (see)\n    alpha émoji🙂 alpha beta be alpha naïve\nto x émoji🙂 beta\n(see) gamma gamma émoji🙂 alpha to (see) delta\nto gamma gamma",
        20,
        50,
        [
            "~~~\ngamma be a.b émoji🙂 x\n~~~",
            "~~~\ngamma gamma émoji🙂 to be delta naïve to\n~~~",
            "~~~\ngamma\nx x (see) a.b a.b alpha\n~~~",
            "~~~\nnaïve a.b to be alpha x\n~~~",
            "~~~\n    (see) gamma beta beta to naïve (see)\n~~~",
            "~~~\n    alpha émoji🙂 alpha beta be alpha naïve\n~~~",
            "~~~\nto x émoji🙂 beta\n~~~",
            "~~~\n(see) gamma gamma émoji🙂 alpha to (see)\n~~~",
            "~~~\ndelta\nto gamma gamma\n~~~",
        ],
    ),
]


@pytest.mark.parametrize(("text", "min_chars", "max_chars", "parts"), CASES)
def test_the_parts_the_rules_pick(
    text: str, min_chars: int, max_chars: int, parts: list[str]
) -> None:
    assert chunk_text(text, min_chars, max_chars) == parts
    restore(text, parts)
    assert all(balanced(p) and len(p) <= max_chars for p in parts)


def test_the_default_sizes_are_300_and_1000() -> None:
    # A sentence end exactly at 300 characters is taken over a word break further on ...
    text = "a" * 299 + ". " + "b" * 300 + " " + "c" * 500
    assert chunk_text(text) == ["a" * 299 + ".", "b" * 300 + " " + "c" * 500]
    # ... and 1000 characters without a break still fit one part; 1001 do not.
    assert chunk_text("d" * 1000) == ["d" * 1000]
    assert chunk_text("d" * 1001) == ["d" * 1000, "d"]


@pytest.mark.parametrize(("min_chars", "max_chars"), [(0, 39), (-1, 100), (101, 100)])
def test_bad_limits_say_what_is_allowed(min_chars: int, max_chars: int) -> None:
    with pytest.raises(ValueError) as caught:
        chunk_text("text", min_chars, max_chars)
    assert str(caught.value) == "need 0 <= min_chars <= max_chars and max_chars >= 40"
