"""Output buffers and the streamer behind ToolContext.on_update."""

from __future__ import annotations

import asyncio
import logging
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
    """Records each piece with the event loop's clock (the clock the streamer throttles by)."""

    def __init__(self) -> None:
        self.pieces: list[tuple[float, str]] = []
        self.arrived = asyncio.Event()

    async def __call__(self, text: str) -> None:
        self.pieces.append((asyncio.get_running_loop().time(), text))
        self.arrived.set()

    @property
    def text(self) -> str:
        return "".join(text for _, text in self.pieces)

    @property
    def texts(self) -> list[str]:
        return [text for _, text in self.pieces]

    async def wait_for(self, count: int, timeout: float = 10.0) -> None:
        """Until ``count`` pieces arrived (bounded: a missing piece fails the test)."""
        async with asyncio.timeout(timeout):
            while len(self.pieces) < count:
                self.arrived.clear()
                await self.arrived.wait()


async def test_streamer_coalesces_and_throttles() -> None:
    # The first piece goes out at once; within the interval, everything fed after it is
    # held back and coalesced (the loop runs between feeds, so a streamer that did not
    # throttle would send each chunk on its own).
    recorder = Recorder()
    streamer = OutputStreamer(recorder, interval_s=3600, max_bytes=4096)
    streamer.feed(b"0,")
    await recorder.wait_for(1)
    for i in range(1, 20):
        streamer.feed(f"{i},".encode())
        for _ in range(5):
            await asyncio.sleep(0)
    assert recorder.texts == ["0,"]
    await streamer.close()  # flushes what is pending, in one piece
    assert recorder.texts == ["0,", "".join(f"{i}," for i in range(1, 20))]

    # Without a close, what is pending goes out once the interval since the last piece is
    # over, and not before.
    recorder = Recorder()
    streamer = OutputStreamer(recorder, interval_s=0.2, max_bytes=4096)
    streamer.feed(b"a")
    await recorder.wait_for(1)
    streamer.feed(b"b")
    streamer.feed(b"c")
    await recorder.wait_for(2)
    assert recorder.texts == ["a", "bc"]
    (first, _), (second, _) = recorder.pieces
    assert second - first >= 0.2 - 1e-3
    await streamer.close()
    assert recorder.texts == ["a", "bc"]


async def test_streamer_sends_early_when_enough_is_pending() -> None:
    recorder = Recorder()
    streamer = OutputStreamer(recorder, interval_s=3600, max_bytes=100)
    streamer.feed(b"first")
    await recorder.wait_for(1)
    streamer.feed(b"x" * 150)  # more than max_bytes: no waiting for the hour-long interval
    await recorder.wait_for(2)
    assert recorder.texts == ["first", "x" * 150]
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
    called = asyncio.Event()

    async def broken(text: str) -> None:
        nonlocal calls
        calls += 1
        called.set()
        raise RuntimeError("bus down")

    streamer = OutputStreamer(broken, interval_s=0)
    with caplog.at_level(logging.WARNING, logger="switchboard_tools.output"):
        streamer.feed(b"one")
        async with asyncio.timeout(10):
            await called.wait()  # the first call has failed: "two" comes after it
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
