"""Bounded JSON (``switchboard.jsonsafe``), what every entry point parses outside input with:
nesting up to exactly ``max_depth`` levels, size up to exactly ``max_bytes`` bytes (of UTF-8,
whatever type the text comes as), UTF-8 only, nothing that is not JSON; every refusal a
:class:`JsonRefused` (a ValueError) whose message never repeats the input; the depth measured
without recursion."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.jsonsafe import MAX_BYTES, MAX_DEPTH, JsonRefused, depth, loads

MARKER = "zq-marker-58e1"  # in refused inputs: never in the message


def arrays(levels: int) -> str:
    return "[" * levels + "]" * levels


def objects(levels: int) -> str:
    return '{"k":' * (levels - 1) + "{}" + "}" * (levels - 1)


def refusal(data: str | bytes | bytearray, **bounds: int) -> str:
    with pytest.raises(JsonRefused) as caught:
        loads(data, **bounds)
    return str(caught.value)


@pytest.fixture
def low_recursion_limit() -> Iterator[None]:
    """A recursion limit far below the nesting the test builds: a recursive walk would fail."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def test_the_documented_bounds() -> None:
    assert MAX_DEPTH == 64 and MAX_BYTES == 8 * 1024 * 1024
    assert issubclass(JsonRefused, ValueError)


@pytest.mark.parametrize("build", [arrays, objects], ids=["arrays", "objects"])
def test_depth_64_is_accepted_and_65_refused(build: Any) -> None:
    assert depth(loads(build(MAX_DEPTH))) == MAX_DEPTH
    assert (
        refusal(build(MAX_DEPTH + 1)) == f"the JSON document nests deeper than {MAX_DEPTH} levels"
    )


def test_mixed_nesting_counts_arrays_and_objects() -> None:
    text = '{"a": [{"b": [1, {"c": []}]}], "d": 1}'  # 6 levels on the deepest branch
    assert depth(json.loads(text)) == 6
    assert loads(text, max_depth=6) == json.loads(text)
    assert "deeper than 5 levels" in refusal(text, max_depth=5)


def test_depth_values() -> None:
    values: list[Any] = [1, "s", None, [], {}, [1], [[]], {"a": {"b": 1}}]
    assert [depth(v) for v in values] == [0, 0, 0, 1, 1, 1, 2, 2]
    assert depth([[1], [[[2]]], []]) == 4  # the deepest branch, not the last
    assert depth(json.loads(arrays(100)), limit=10) == 11  # stops past the limit


@pytest.mark.parametrize(
    "text",
    [arrays(100_000), "[" * 100_000, objects(100_000), '{"a":' * 100_000],
    ids=["arrays", "unclosed-arrays", "objects", "unclosed-objects"],
)
def test_100k_levels_are_refused_not_a_recursion_error(text: str) -> None:
    message = refusal(text)
    assert "nests deeper" in message or message.startswith("not valid JSON"), message


def test_the_depth_walk_is_not_recursive(low_recursion_limit: None) -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert depth(deep, limit=200_000) == 100_001
    assert depth(deep) == MAX_DEPTH + 1
    wide_and_deep: dict[str, Any] = {"a": deep, "b": [1, 2, 3]}
    assert depth(wide_and_deep, limit=200_000) == 100_002


def test_invalid_utf8_is_refused() -> None:
    for data in (b'["\xc3\x28"]', b'{"a": "\xff"}', b'"\xed\xa0\x80"'):  # the last: a surrogate
        assert refusal(data) == "the JSON document is not valid UTF-8"


def test_only_utf8_bytes() -> None:
    assert loads('{"a": "é"}'.encode()) == {"a": "é"}
    assert loads(b"\xef\xbb\xbf[1]") == [1]  # a UTF-8 byte order mark is allowed
    assert loads(bytearray(b'{"a": 1}')) == {"a": 1}
    for encoding in ("utf-16-le", "utf-32-be"):  # json.loads alone would guess these
        assert refusal("[1]".encode(encoding)).startswith("not valid JSON")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "{",
        "[1,]",
        "{'a': 1}",
        f"{MARKER}",
        f'{{"a": {MARKER}}}',
        f'["{MARKER}"',
        "NaN",
        "[Infinity]",
        '{"id": -Infinity}',
        "1" * 5000,  # an integer past CPython's conversion limit (a ValueError of its own)
        f'["{MARKER}"] trailing',
    ],
)
def test_what_is_not_json_is_refused_without_echoing_it(text: str) -> None:
    message = refusal(text)
    assert message.startswith("not valid JSON"), message
    assert MARKER not in message and "1" * 50 not in message


def test_a_nan_string_is_still_a_string() -> None:
    assert loads('["NaN", "Infinity"]') == ["NaN", "Infinity"]


def test_the_size_limit_in_bytes() -> None:
    exactly = '"' + "a" * 98 + '"'
    assert loads(exactly, max_bytes=100) == "a" * 98
    assert loads(exactly.encode(), max_bytes=100) == "a" * 98
    over = '"' + "a" * 99 + '"'
    for data in (over, over.encode(), bytearray(over.encode())):
        assert refusal(data, max_bytes=100) == "the JSON document is larger than 100 bytes"


def test_the_size_of_text_is_its_utf8_size() -> None:
    # 32 characters, 122 bytes of UTF-8: over a 100-byte bound whichever type it comes as.
    text = '"' + "\U0001f600" * 30 + '"'
    assert len(text) == 32 and len(text.encode()) == 122
    assert refusal(text, max_bytes=100) == "the JSON document is larger than 100 bytes"
    assert refusal(text.encode(), max_bytes=100) == "the JSON document is larger than 100 bytes"
    assert loads(text, max_bytes=122) == "\U0001f600" * 30


def test_the_size_is_checked_before_parsing() -> None:
    # Not JSON at all, and too deep: the size is what is said, so nothing was parsed.
    assert refusal("[" * 200 + MARKER, max_bytes=100).startswith("the JSON document is larger")


def test_the_default_size_bound() -> None:
    big = json.dumps(["x" * 1000] * 9000)  # about 9 MB: over the 8 MiB default
    assert len(big) > MAX_BYTES
    assert refusal(big) == f"the JSON document is larger than {MAX_BYTES} bytes"
