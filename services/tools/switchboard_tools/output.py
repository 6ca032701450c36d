"""Where a child's output goes: a head buffer (one-shot commands), a ring buffer (long-running
processes) and a streamer that hands partial output to a callback, coalesced."""

from __future__ import annotations

import asyncio
import codecs
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

OutputCallback = Callable[[str], Awaitable[None]]

# Streaming defaults: at most one update per interval, unless this much is pending.
STREAM_INTERVAL_S = 0.15
STREAM_MAX_BYTES = 4096
# How long the final flush of a streamer may take before it is abandoned.
_CLOSE_TIMEOUT_S = 2.0


class Output:
    """Keeps the first ``cap`` bytes, counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self.data = bytearray()
        self.total = 0

    @property
    def truncated(self) -> bool:
        return self.total > len(self.data)

    def feed(self, chunk: bytes) -> bytes:
        """Add ``chunk``; return the part that was kept."""
        room = self.cap - len(self.data)
        kept = chunk[:room] if room > 0 else b""
        self.data += kept
        self.total += len(chunk)
        return kept

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")


class RingOutput:
    """Keeps the last ``cap`` bytes. Positions are absolute offsets into everything ever fed, so
    a reader can ask for what arrived since its last read and learn how much rotated out."""

    def __init__(self, cap: int) -> None:
        self.cap = max(1, cap)
        self.data = bytearray()
        self.total = 0

    @property
    def start(self) -> int:
        """Absolute offset of the oldest byte still held."""
        return self.total - len(self.data)

    @property
    def truncated(self) -> bool:
        return self.start > 0

    def feed(self, chunk: bytes) -> bytes:
        self.total += len(chunk)
        self.data += chunk[-self.cap :]
        excess = len(self.data) - self.cap
        if excess > 0:
            del self.data[:excess]
        return chunk

    def since(self, position: int) -> tuple[bytes, int]:
        """The bytes from absolute ``position`` on, and how many before them were lost."""
        start = self.start
        dropped = max(0, start - position)
        return bytes(self.data[max(position, start) - start :]), dropped


class OutputStreamer:
    """Hands decoded output to ``callback`` in coalesced pieces: the first piece at once, then
    at most one call every ``interval_s`` unless ``max_bytes`` are pending. :meth:`feed` never
    blocks (calls happen on the streamer's own task), so a slow callback cannot stall the
    reader; what is pending meanwhile is bounded by what the caller feeds (the output cap).
    Text is decoded incrementally, so a multi-byte character is never split between pieces.
    A callback that raises is logged and gets no further pieces."""

    def __init__(
        self,
        callback: OutputCallback,
        *,
        interval_s: float = STREAM_INTERVAL_S,
        max_bytes: int = STREAM_MAX_BYTES,
    ) -> None:
        self._callback = callback
        self.interval_s = interval_s
        self.max_bytes = max_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = bytearray()
        self._wake = asyncio.Event()
        self._closing = False
        self._failed = False
        self._task = asyncio.create_task(self._run())

    def feed(self, data: bytes) -> None:
        if self._failed or self._closing or not data:
            return
        self._pending += data
        self._wake.set()

    async def close(self) -> None:
        """Flush what is pending (bounded in time) and stop."""
        self._closing = True
        self._wake.set()
        done, _ = await asyncio.wait({self._task}, timeout=_CLOSE_TIMEOUT_S)
        if not done:
            log.warning("tool output update still pending after %ss; dropped", _CLOSE_TIMEOUT_S)
            self.abort()

    def abort(self) -> None:
        """Stop without flushing (the call was cancelled)."""
        self._closing = True
        if not self._task.done():
            self._task.cancel()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last = float("-inf")
        while True:
            await self._wake.wait()
            self._wake.clear()
            while not self._closing and len(self._pending) < self.max_bytes:
                remaining = last + self.interval_s - loop.time()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(self._wake.wait(), remaining)
                except TimeoutError:
                    break  # the interval is over: emit what is pending
                self._wake.clear()
            await self._emit(final=self._closing)
            last = loop.time()
            if self._closing:
                await self._emit(final=True)  # what came in while the last call ran
                return

    async def _emit(self, *, final: bool) -> None:
        data = bytes(self._pending)
        self._pending.clear()
        text = self._decoder.decode(data, final=final)
        if not text or self._failed:
            return
        try:
            await self._callback(text)
        except Exception:
            self._failed = True
            log.warning("tool output update failed; no more updates for this call", exc_info=True)
