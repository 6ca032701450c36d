"""The local embedding model, loaded when it is first needed and released when idle.

Nothing of it is loaded, or even imported (NumPy, ``tokenizers``), when the service starts: an
assistant that nobody talks to should not hold an embedding model. The first embedding (a
search, a stored turn) loads it in a worker thread; embeddings asked for meanwhile wait for that
one load; keyword searches and health never wait. After ``idle_unload_s`` without an embedding
the model is dropped (its memory-mapped weights go back to the page cache) and the next
embedding loads it again; 0 keeps it loaded for good.

Its name and size are known without loading it (collections are created with the size)."""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from .errors import EmbeddingUnavailable
from .metrics import LOCAL_MODEL_LOADED
from .model_spec import describe

log = logging.getLogger(__name__)
# A call of this many texts or more (stored turns, document chunks; a query is one) is followed
# by a heap trim: its forward passes' buffers would stay in glibc's heap otherwise.
BULK = 8


class Loaded(Protocol):
    """A loaded model (:class:`.local_model.LocalEmbedder`)."""

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]: ...


def load_local(model: str) -> Loaded:
    """Import the runtime and load the model (blocking: run it in a thread)."""
    from .local_model import LocalEmbedder

    return LocalEmbedder.load(model)


class LazyEmbedder:
    """The local model behind the :class:`~.embeddings.Embedder` interface, loaded on first use
    and dropped after ``idle_unload_s`` without use (0: never)."""

    def __init__(self, model: str, idle_unload_s: float) -> None:
        self._spec = describe(model)
        self._name = model
        self._idle_s = idle_unload_s
        self._model: Loaded | None = None
        self._loading: asyncio.Task[Loaded] | None = None
        self._busy = 0  # embeddings running now: never unload under them
        self._last_used = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.loads = 0  # how many times the model was loaded (tests, logs)

    @property
    def provider(self) -> str:
        return "local"

    @property
    def model(self) -> str:
        return self._spec.name

    @property
    def dimension(self) -> int:
        return self._spec.dimension

    @property
    def loaded(self) -> bool:
        return self._model is not None

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        self._busy += 1
        try:
            model = self._model or await self._load()
            return await model.embed(texts, query)
        finally:
            self._busy -= 1
            self._last_used = time.monotonic()
            if len(texts) >= BULK:
                trim_heap()

    async def _load(self) -> Loaded:
        """The one load every concurrent first use waits for (shielded: a caller that gives
        up does not cancel it for the others)."""
        if self._loading is None:
            self._loading = asyncio.create_task(self._load_once())
        try:
            return await asyncio.shield(self._loading)
        except Exception as exc:  # any failure of the load: searches fall back to keywords
            raise EmbeddingUnavailable(
                f"the local model failed to load ({type(exc).__name__}; see the service's log)"
            ) from exc

    async def _load_once(self) -> Loaded:
        started = time.monotonic()
        try:
            model = await asyncio.to_thread(load_local, self._name)
        except Exception as exc:  # files missing or damaged (tokenizers raises bare Exception)
            log.warning("the local embedding model failed to load: %s", exc)
            raise
        finally:
            self._loading = None  # a failed load is tried again by the next embedding
        self._model = model
        self.loads += 1
        LOCAL_MODEL_LOADED.set(1)
        log.info(
            "local embedding model loaded",
            extra={"model": self._spec.name, "seconds": round(time.monotonic() - started, 3)},
        )
        if self._idle_s > 0:
            self._arm(self._idle_s)
        return model

    def _arm(self, delay: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay, self._unload_if_idle)

    def _unload_if_idle(self) -> None:
        """One timer while loaded: fires, then re-arms for what is left of the idle time."""
        self._timer = None
        if self._model is None:
            return
        left = self._last_used + self._idle_s - time.monotonic()
        if self._busy or left > 0:  # busy: its end restarts the idle time
            self._arm(left if left > 0 else self._idle_s)
            return
        self._model = None
        LOCAL_MODEL_LOADED.set(0)
        trim_heap()
        log.info("local embedding model unloaded after %.0f s idle", self._idle_s)

    async def close(self) -> None:
        if self._loading is not None:
            self._loading.cancel()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._model = None
        LOCAL_MODEL_LOADED.set(0)


def trim_heap() -> None:
    """Give freed forward-pass buffers back to the system: glibc keeps freed memory in each
    thread's heap otherwise (figures in docs/memory.md). Nothing where ``malloc_trim`` does not
    exist (musl, macOS)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    # The process's own symbols (libc among them): no library search, no subprocess.
    return cast("Callable[[int], int] | None", getattr(ctypes.CDLL(None), "malloc_trim", None))
