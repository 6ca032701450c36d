"""JSON from outside, bounded: every entry point that parses a body or a frame from a client or
a platform (WebChat, channel webhooks, hooks, the OpenAI API, A2A, MCP) parses it here, so a
deeply nested or oversized document is a clear error instead of a ``RecursionError`` (and a
500) in whatever walks it next.

``loads`` refuses more than ``max_bytes`` before parsing and more than ``max_depth`` levels of
arrays and objects after it. The depth is measured without recursion; CPython's own parser
raises ``RecursionError`` somewhere near a thousand levels, which is caught and refused the
same way."""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # far above any platform's payload (Slack's block kit nests about 8 deep)
MAX_BYTES = 8 * 1024 * 1024


class JsonRefused(ValueError):
    """The text is not JSON, or more than the bounds allow; the message is safe to show the
    sender (it never repeats the input)."""


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply ``value`` nests arrays and objects (a scalar is 0); stops counting once past
    ``limit`` (returns ``limit + 1``)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        if level > limit:
            return limit + 1
        deepest = max(deepest, level)
        stack.extend((child, level) for child in children if isinstance(child, dict | list))
    return deepest


def loads(
    data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES
) -> Any:
    """``json.loads(data)`` within the bounds, else :class:`JsonRefused`. Bytes must be UTF-8
    (an initial byte order mark is allowed); ``NaN`` and ``Infinity`` are refused: they are
    not JSON, and whatever echoed them back (a JSON-RPC ``id``) could not serialise them."""
    if _too_large(data, max_bytes):
        raise JsonRefused(f"the JSON document is larger than {max_bytes} bytes")
    try:
        text = data if isinstance(data, str) else data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise JsonRefused("the JSON document is not valid UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_not_json)
    except RecursionError:
        raise JsonRefused(f"the JSON document nests deeper than {max_depth} levels") from None
    except ValueError as exc:  # json.JSONDecodeError, and odd inputs json itself refuses
        where = (
            f" (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        raise JsonRefused(f"not valid JSON{where}") from None
    if depth(value, max_depth) > max_depth:
        raise JsonRefused(f"the JSON document nests deeper than {max_depth} levels")
    return value


def _too_large(data: str | bytes | bytearray, max_bytes: int) -> bool:
    """More than ``max_bytes`` of UTF-8 (a ``str`` is encoded only when its characters could
    be: up to 4 bytes each)."""
    if len(data) > max_bytes:
        return True
    if isinstance(data, str) and len(data) * 4 > max_bytes:
        return len(data.encode("utf-8", "surrogatepass")) > max_bytes
    return False


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")
