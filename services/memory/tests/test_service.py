"""The memory service through its gRPC API, against real Qdrant local mode, PostgreSQL and
nats-server, with the OpenAI-compatible embeddings provider talking to a fake server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

from switchboard.v1 import memory_pb2
from tests.fakes.embeddings import FakeEmbeddings

from .memory_harness import RunningMemory, memory_service, note, scope


@pytest.fixture
def embeddings() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dimension=64, require_key="emb-key") as fake:
        yield fake


@pytest.fixture(params=["edge", "client"])
async def mem(
    request: pytest.FixtureRequest,
    nats_url: str,
    database_url: str,
    tmp_path: Path,
    embeddings: FakeEmbeddings,
) -> AsyncIterator[RunningMemory]:
    """The service on each local engine: Qdrant Edge (the embedded default) and qdrant-client's
    local mode (the client code the Qdrant server is used through)."""
    async with memory_service(
        nats_url,
        database_url,
        tmp_path,
        SB_QDRANT_LOCAL_ENGINE=request.param,
        SB_EMBEDDING_PROVIDER="openai",
        SB_EMBEDDING_BASE_URL=embeddings.base_url,
        SB_EMBEDDING_API_KEY="emb-key",
        SB_EMBEDDING_MODEL="fake-embed",
        SB_REPAIR_INTERVAL_S="0.2",
    ) as m:
        yield m


async def test_store_then_search_in_every_mode(mem: RunningMemory) -> None:
    stored = await mem.stub.Upsert(
        memory_pb2.UpsertRequest(
            scope=scope(),
            items=[
                note("My sister Alice lives in Lisbon and loves sardines."),
                note("The garage door code is 4411."),
                note("I prefer green tea in the morning."),
            ],
        )
    )
    assert len(stored.ids) == 3 and not stored.degraded
    for mode in ("hybrid", "vector", "keyword"):
        found = await mem.stub.Search(
            memory_pb2.SearchRequest(scope=scope(), query="where does Alice live", k=2, mode=mode)
        )
        assert found.mode == mode and not found.degraded
        assert "Lisbon" in found.hits[0].text, (mode, [h.text for h in found.hits])
        assert found.hits[0].source == "note"


async def test_the_same_note_twice_is_one_entry(mem: RunningMemory) -> None:
    request = memory_pb2.UpsertRequest(scope=scope(), items=[note("Parking spot 17")])
    first = await mem.stub.Upsert(request)
    second = await mem.stub.Upsert(request)
    assert first.ids == second.ids
    found = await mem.stub.Search(memory_pb2.SearchRequest(scope=scope(), query="parking", k=10))
    assert [h.text for h in found.hits] == ["Parking spot 17"]


async def test_scopes_do_not_leak(mem: RunningMemory) -> None:
    await mem.stub.Upsert(
        memory_pb2.UpsertRequest(scope=scope("main", "telegram:1"), items=[note("Bob's pin 1234")])
    )
    await mem.stub.Upsert(
        memory_pb2.UpsertRequest(scope=scope("other"), items=[note("Other agent's pin 9999")])
    )
    mine = await mem.stub.Search(
        memory_pb2.SearchRequest(scope=scope("main", "telegram:1"), query="pin", k=10)
    )
    assert [h.text for h in mine.hits] == ["Bob's pin 1234"]
    for who in (scope("main"), scope("main", "telegram:2"), scope("main", "group:slack:C1")):
        found = await mem.stub.Search(memory_pb2.SearchRequest(scope=who, query="pin", k=10))
        assert not found.hits, who
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await mem.stub.Search(memory_pb2.SearchRequest(scope=scope("nobody"), query="pin"))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


async def test_delete_removes_from_search(mem: RunningMemory) -> None:
    stored = await mem.stub.Upsert(
        memory_pb2.UpsertRequest(scope=scope(), items=[note("wifi password is hunter2")])
    )
    # Another scope cannot delete it by id.
    other = await mem.stub.Delete(
        memory_pb2.DeleteRequest(scope=scope("main", "x:1"), ids=stored.ids)
    )
    assert other.deleted == 0
    done = await mem.stub.Delete(memory_pb2.DeleteRequest(scope=scope(), ids=stored.ids))
    assert done.deleted == 1
    found = await mem.stub.Search(memory_pb2.SearchRequest(scope=scope(), query="wifi password"))
    assert not found.hits


@pytest.mark.parametrize(
    ("request_", "code", "words"),
    [
        (memory_pb2.SearchRequest(scope=scope(), query=""), "INVALID_ARGUMENT", "empty"),
        (memory_pb2.SearchRequest(scope=scope(), query="x", k=101), "INVALID_ARGUMENT", "k must"),
        (memory_pb2.SearchRequest(scope=scope(), query="x", k=-1), "INVALID_ARGUMENT", "k must"),
        (
            memory_pb2.SearchRequest(scope=scope(), query="x", mode="fuzzy"),
            "INVALID_ARGUMENT",
            "mode",
        ),
        (
            memory_pb2.SearchRequest(
                scope=scope(), query="x", filter=memory_pb2.SearchFilter(metadata={"a b": "c"})
            ),
            "INVALID_ARGUMENT",
            "metadata",
        ),
        (
            memory_pb2.SearchRequest(
                scope=scope(), query="x", filter=memory_pb2.SearchFilter(after_ms=5, before_ms=4)
            ),
            "INVALID_ARGUMENT",
            "after_ms",
        ),
        (
            memory_pb2.SearchRequest(scope=scope("Bad Agent"), query="x"),
            "INVALID_ARGUMENT",
            "agent",
        ),
    ],
)
async def test_bad_searches_get_a_clear_status(
    mem: RunningMemory, request_: memory_pb2.SearchRequest, code: str, words: str
) -> None:
    await mem.stub.Upsert(memory_pb2.UpsertRequest(scope=scope(), items=[note("something")]))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await mem.stub.Search(request_)
    assert err.value.code().name == code and words in (err.value.details() or "")


async def test_bad_upserts_get_a_clear_status(mem: RunningMemory) -> None:
    cases = [
        (memory_pb2.UpsertRequest(scope=scope(), items=[note("   ")]), "empty"),
        (memory_pb2.UpsertRequest(scope=scope(), items=[note("x" * 16_001)]), "at most"),
        (memory_pb2.UpsertRequest(scope=scope(), items=[]), "no items"),
        (
            memory_pb2.UpsertRequest(
                scope=scope(), items=[memory_pb2.MemoryItem(text="x", source="dream")]
            ),
            "source",
        ),
    ]
    for request, words in cases:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await mem.stub.Upsert(request)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert words in (err.value.details() or ""), err.value.details()
    # The service is still there and lost nothing.
    await mem.stub.Upsert(memory_pb2.UpsertRequest(scope=scope(), items=[note("still here")]))


async def test_provider_down_degrades_to_keywords_then_repairs(
    mem: RunningMemory, embeddings: FakeEmbeddings
) -> None:
    embeddings.down = True
    stored = await mem.stub.Upsert(
        memory_pb2.UpsertRequest(scope=scope(), items=[note("The boat is called Marigold")])
    )
    assert "without embeddings" in stored.degraded and "503" in stored.degraded
    found = await mem.stub.Search(memory_pb2.SearchRequest(scope=scope(), query="boat name"))
    assert found.mode == "keyword" and "keyword search only" in found.degraded
    assert "Marigold" in found.hits[0].text
    embeddings.down = False
    # Once the provider is back, the entry gets its dense vector and vector search finds it.
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        found = await mem.stub.Search(
            memory_pb2.SearchRequest(scope=scope(), query="boat called", mode="vector")
        )
        assert found.mode == "vector" and not found.degraded
        if found.hits and "Marigold" in found.hits[0].text:
            break
        assert asyncio.get_running_loop().time() < deadline, "never embedded"
        await asyncio.sleep(0.1)


async def test_local_model_is_the_default(nats_url: str, database_url: str, tmp_path: Path) -> None:
    """No embedding setting at all: the packaged all-MiniLM-L6-v2 embeds, offline."""
    async with memory_service(nats_url, database_url, tmp_path) as m:
        vectors = await m.stub.Embed(
            memory_pb2.EmbedRequest(
                texts=["A man is eating food.", "A man is eating a piece of bread.", "Violin"]
            )
        )
        assert (vectors.provider, vectors.model, vectors.dimension) == (
            "local",
            "all-MiniLM-L6-v2",
            384,
        )
        a, b, c = (v.values for v in vectors.vectors)
        close = sum(x * y for x, y in zip(a, b, strict=True))
        far = sum(x * y for x, y in zip(a, c, strict=True))
        # sentence-transformers gives 0.7553 for this pair with this model.
        assert abs(close - 0.7553) < 0.002 and far < 0.3, (close, far)
        again = await m.stub.Embed(memory_pb2.EmbedRequest(texts=["A man is eating food."]))
        assert again.cached == 1 and list(again.vectors[0].values) == list(a)


@pytest.mark.parametrize("engine", ["edge", "client"])
async def test_a_restart_loses_nothing(
    nats_url: str, database_url: str, tmp_path: Path, embeddings: FakeEmbeddings, engine: str
) -> None:
    env = {
        "SB_QDRANT_LOCAL_ENGINE": engine,
        "SB_EMBEDDING_PROVIDER": "openai",
        "SB_EMBEDDING_BASE_URL": embeddings.base_url,
        "SB_EMBEDDING_API_KEY": "emb-key",
    }
    async with memory_service(nats_url, database_url, tmp_path, **env) as m:
        await m.stub.Upsert(
            memory_pb2.UpsertRequest(scope=scope(), items=[note("The dentist is on Elm Street")])
        )
        header = memory_pb2.DocumentHeader(scope=scope(), path="notes/todo.md")
        await m.stub.IngestDocument(
            iter([memory_pb2.IngestChunk(header=header, data=b"# Todo\n\nBuy lemons\n")])
        )
    async with memory_service(nats_url, database_url, tmp_path, **env) as m:
        found = await m.stub.Search(memory_pb2.SearchRequest(scope=scope(), query="dentist"))
        assert "Elm Street" in found.hits[0].text
        got = await m.stub.Get(memory_pb2.GetRequest(scope=scope(), path="notes/todo.md"))
        assert got.text == "# Todo\n\nBuy lemons" and got.total_lines == 3
        found = await m.stub.Search(memory_pb2.SearchRequest(scope=scope(), query="lemons"))
        assert found.hits[0].path == "notes/todo.md"
