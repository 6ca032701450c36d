"""Output buffers and the streamer behind ToolContext.on_update."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from switchboard_tools.output import OutputStreamer, RingOutput
from switchboard_tools.registry import ToolOutput
from switchboard_tools.tools.exec import DEFAULT_EXEC_OUTPUT_CAP

Call = Callable[..., Awaitable[ToolOutput]]


def test_ring_output_keeps_the_tail_with_absolute_positions() -> None:
    ring = RingOutput(10)
    ring.feed(b"0123456789")
    assert ring.since(0) == (b"0123456789", 0)
    ring.feed(b"abcd")
    assert ring.truncated and ring.start == 4 and ring.total == 14
    assert ring.since(0) == (b"456789abcd", 4)
    assert ring.since(12) == (b"cd", 0)
    ring.feed(b"x" * 25)
    assert ring.since(14) == (b"x" * 10, 15)


class Recorder:
    def __init__(self) -> None:
        self.pieces: list[tuple[float, str]] = []

    async def __call__(self, text: str) -> None:
        self.pieces.append((time.monotonic(), text))

    @property
    def text(self) -> str:
        return "".join(text for _, text in self.pieces)


async def test_streamer_coalesces_and_throttles() -> None:
    recorder = Recorder()
    streamer = OutputStreamer(recorder, interval_s=0.2, max_bytes=4096)
    for i in range(20):  # 20 small chunks over ~0.4 s
        streamer.feed(f"{i},".encode())
        await asyncio.sleep(0.02)
    await streamer.close()
    assert recorder.text == "".join(f"{i}," for i in range(20))
    assert 2 <= len(recorder.pieces) <= 4  # the first at once, then one per interval
    gaps = [b[0] - a[0] for a, b in zip(recorder.pieces, recorder.pieces[1:], strict=False)]
    assert all(gap >= 0.15 for gap in gaps[:-1])  # the final flush may come sooner


async def test_streamer_sends_early_when_enough_is_pending() -> None:
    recorder = Recorder()
    streamer = OutputStreamer(recorder, interval_s=10, max_bytes=100)
    streamer.feed(b"first")
    await asyncio.sleep(0.05)
    streamer.feed(b"x" * 150)
    await asyncio.sleep(0.05)
    assert [text for _, text in recorder.pieces] == ["first", "x" * 150]
    await streamer.close()


async def test_streamer_never_splits_a_character() -> None:
    recorder = Recorder()
    streamer = OutputStreamer(recorder, interval_s=0)
    data = "héllo wörld €".encode()
    for i in range(len(data)):
        streamer.feed(data[i : i + 1])
        await asyncio.sleep(0)
    await streamer.close()
    assert recorder.text == "héllo wörld €" and "\ufffd" not in recorder.text


async def test_a_failing_callback_is_logged_and_dropped(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    async def broken(text: str) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("bus down")

    streamer = OutputStreamer(broken, interval_s=0)
    with caplog.at_level(logging.WARNING, logger="switchboard_tools.output"):
        streamer.feed(b"one")
        await asyncio.sleep(0.01)
        streamer.feed(b"two")
        await streamer.close()
    assert calls == 1
    assert "no more updates for this call" in caplog.text


async def test_exec_streams_within_the_output_cap(call: Call, workspace: Path) -> None:
    (workspace / "big.txt").write_text("é" * 100_000)  # 200 kB, two bytes per character
    recorder = Recorder()
    out = await call("exec", {"command": "cat big.txt"}, on_update=recorder)
    assert out.details["truncated"]
    assert len(recorder.text.encode()) == DEFAULT_EXEC_OUTPUT_CAP  # never more than the cap
    assert set(recorder.text) == {"é"}
    assert out.content.startswith(recorder.text)


async def test_exec_without_listener_or_output(call: Call) -> None:
    recorder = Recorder()
    out = await call("exec", {"command": "true"}, on_update=recorder)
    assert not out.is_error and recorder.pieces == []
    out = await call("exec", {"command": "echo plain"})
    assert out.content == "plain\n"
