"""What the model sees of a transcript: the size estimate, tool-result pruning, where the
compacted part ends, and the text the flush and the summary are made from."""

from __future__ import annotations

from typing import Any

from switchboard_agent.compaction.config import context_window
from switchboard_agent.compaction.context_view import (
    IMAGE_CHARS,
    ContextMeter,
    choose_cut,
    prune_tool_results,
    render,
    request_chars,
)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def tool_turn(n: int, result: str) -> list[dict[str, Any]]:
    return [
        user(f"read {n}"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"t{n}", "name": "read", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": result}],
        },
        said(f"done {n}"),
    ]


def results(messages: list[dict[str, Any]]) -> list[str]:
    return [
        b["content"]
        for m in messages
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def test_old_long_tool_results_are_pruned_and_recent_or_short_ones_kept() -> None:
    messages = [*tool_turn(1, "x" * 2000), *tool_turn(2, "short"), *tool_turn(3, "y" * 2000)]
    pruned = prune_tool_results(messages, keep_turns=2)
    first, second, third = results(pruned)
    assert first.startswith("[pruned: an older result of read (2000 characters)")
    assert second == "short"  # shorter than the note: kept
    assert third == "y" * 2000  # within the last two user turns
    assert results(messages)[0] == "x" * 2000  # the input is not changed
    assert pruned[4] is messages[4]  # untouched messages are the same objects
    assert prune_tool_results(messages, keep_turns=0) is messages  # 0: off


def test_the_cut_keeps_whole_turns_and_shrinks_the_tail_to_its_budget() -> None:
    messages = [*tool_turn(1, "a"), user("two"), said("2"), user("three" * 100), said("3")]
    assert choose_cut(messages, keep_turns=2, budget_chars=10_000) == 4  # at "two"
    assert choose_cut(messages, keep_turns=2, budget_chars=540) == 6  # only "three" fits
    assert choose_cut(messages, keep_turns=2, budget_chars=10) == len(messages)  # none fits
    assert choose_cut(messages, keep_turns=0, budget_chars=10_000) == len(messages)
    assert choose_cut(messages, keep_turns=5, budget_chars=10_000) == 0  # nothing older
    assert choose_cut([], keep_turns=0, budget_chars=10) == 0


def test_the_meter_starts_from_the_providers_count() -> None:
    meter = ContextMeter(capacity=2)
    assert meter.estimate("s", 4000) == 1000  # nothing reported yet: chars / 4
    meter.observe("s", 4000, 1500)  # the provider counts more than chars / 4
    assert meter.estimate("s", 6000) == 1500 + 500  # the count plus what was added
    assert meter.estimate("s", 2000) == 750  # shrunk: in proportion
    meter.observe("t", 10, 5)
    meter.observe("u", 10, 5)
    assert meter.estimate("s", 4000) == 1000  # the oldest session was forgotten


def test_images_count_as_their_tokens_not_their_base64() -> None:
    image = {"type": "image", "source": {"type": "base64", "data": "A" * 400_000}}
    assert request_chars("", [{"role": "user", "content": [image]}], []) < IMAGE_CHARS + 100


def test_render_names_tools_and_cuts_the_middle() -> None:
    text = render(tool_turn(1, "r" * 1000), max_chars=100_000)
    assert "User: read 1" in text and "Assistant called read with {}" in text
    assert "Result of read: " + "r" * 600 + " [...400 more]" in text
    long = render([user("a" * 1000), user("b" * 1000)], max_chars=100)
    assert long.startswith("User: aaa") and long.endswith("bbb") and "left out" in long


def test_context_windows() -> None:
    assert context_window("anthropic:claude-sonnet-4-5", {}, 128_000) == 200_000
    assert context_window("openai:gpt-4o-mini", {}, 1) == 128_000
    assert context_window("openai:llama3.2", {}, 8192) == 8192
    assert context_window("openai:gpt-4o", {"gpt-4o": 5000}, 1) == 5000
    assert context_window("openai:gpt-4o", {"openai:gpt-4o": 6000, "gpt-4o": 5000}, 1) == 6000
