"""The local model is loaded by the first embedding, once for concurrent first uses, dropped
after the idle time and loaded again by the next embedding (the real model each time)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from switchboard_memory import local_model
from switchboard_memory.config import MemorySettings
from switchboard_memory.errors import EmbeddingUnavailable
from switchboard_memory.lazy_model import LazyEmbedder
from switchboard_memory.providers import build_embedder


async def wait_until_unloaded(embedder: LazyEmbedder, bound_s: float = 60.0) -> None:
    deadline = time.monotonic() + bound_s
    while embedder.loaded:
        assert time.monotonic() < deadline, "the model was not unloaded"
        await asyncio.sleep(0.05)


@pytest.fixture
async def lazy() -> AsyncIterator[LazyEmbedder]:
    embedder = LazyEmbedder("", idle_unload_s=0)
    yield embedder
    await embedder.close()


async def test_nothing_is_loaded_when_the_service_builds_it(tmp_path: Path) -> None:
    embedder = await build_embedder(MemorySettings.from_environ({"SB_HOME": str(tmp_path)}))
    assert isinstance(embedder, LazyEmbedder)
    await asyncio.sleep(0.5)  # the old embedder had started loading by now
    assert not embedder.loaded and embedder.loads == 0
    assert (embedder.provider, embedder.model, embedder.dimension) == (
        "local",
        "all-MiniLM-L6-v2",
        384,
    )
    [vector] = await embedder.embed(["A man is eating food."])
    assert embedder.loaded and embedder.loads == 1 and len(vector) == 384
    await embedder.close()


async def test_concurrent_first_uses_wait_for_one_load(lazy: LazyEmbedder) -> None:
    texts = [f"sentence number {n}" for n in range(6)]
    answers = await asyncio.gather(*(lazy.embed([t]) for t in texts))
    assert lazy.loads == 1
    assert [a[0] for a in answers] == [(await lazy.embed([t]))[0] for t in texts]
    assert lazy.loads == 1


async def test_a_caller_that_gives_up_does_not_cancel_the_load(lazy: LazyEmbedder) -> None:
    first = asyncio.create_task(lazy.embed(["impatient"]))
    await asyncio.sleep(0)  # the load has started
    first.cancel()
    [vector] = await lazy.embed(["patient"])
    assert len(vector) == 384 and lazy.loads == 1


async def test_unloaded_when_idle_then_loaded_again() -> None:
    embedder = LazyEmbedder("", idle_unload_s=0.3)
    try:
        [before] = await embedder.embed(["The dentist is on Elm Street"])
        assert embedder.loaded
        await wait_until_unloaded(embedder)
        assert embedder.loads == 1
        [after] = await embedder.embed(["The dentist is on Elm Street"])
        assert embedder.loads == 2 and after == before
    finally:
        await embedder.close()


async def test_not_unloaded_while_in_use() -> None:
    """Embeddings closer together than the idle time keep the model loaded."""
    embedder = LazyEmbedder("", idle_unload_s=1.0)
    try:
        await embedder.embed(["first"])
        for _ in range(8):  # 2 s of use, each gap well under the idle time
            await asyncio.sleep(0.25)
            await embedder.embed(["again"])
        assert embedder.loads == 1 and embedder.loaded
    finally:
        await embedder.close()


async def test_missing_model_files_are_unavailable_then_retried(
    lazy: LazyEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wheel's files gone: the embedding fails with a clear error, nothing is cached as
    loaded, and once the files are back the next embedding loads them."""
    monkeypatch.setattr(local_model, "model_dir", lambda: tmp_path / "nowhere")
    with pytest.raises(EmbeddingUnavailable, match="the local model failed to load"):
        await lazy.embed(["x"])
    assert not lazy.loaded and lazy.loads == 0
    monkeypatch.undo()
    [vector] = await lazy.embed(["x"])
    assert len(vector) == 384 and lazy.loads == 1


def test_a_model_the_local_provider_does_not_have_is_refused() -> None:
    with pytest.raises(ValueError, match="all-MiniLM-L6-v2 only"):
        LazyEmbedder("bge-small", idle_unload_s=0)
