"""Keyword-only memory (``SB_EMBEDDING_PROVIDER=none``, embedded mode's default): entries keep
their keyword vector only, searches run on keywords without calling anything "degraded", and
setting a provider later embeds what was stored meanwhile. Real Qdrant engines, PostgreSQL and
nats-server; the OpenAI-compatible provider of the second half is a fake server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from switchboard.v1 import memory_pb2
from tests.fakes.embeddings import FakeEmbeddings

from .memory_harness import memory_service, note, scope

ENGINES = ["edge", "client"]


@pytest.mark.parametrize("engine", ENGINES)
async def test_no_provider_stores_and_finds_by_keywords(
    nats_url: str, database_url: str, tmp_path: Path, engine: str
) -> None:
    async with memory_service(
        nats_url,
        database_url,
        tmp_path,
        SB_QDRANT_LOCAL_ENGINE=engine,
        SB_EMBEDDING_PROVIDER="none",
    ) as m:
        stored = await m.stub.Upsert(
            memory_pb2.UpsertRequest(
                scope=scope(), items=[note("The boat is called Marigold"), note("Buy lemons")]
            )
        )
        assert len(stored.ids) == 2 and stored.degraded == ""  # by choice, not a failure
        found = await m.stub.Search(memory_pb2.SearchRequest(scope=scope(), query="boat"))
        assert (found.mode, found.degraded) == ("keyword", "")
        assert [h.text for h in found.hits] == ["The boat is called Marigold"]
        # A caller that asks for vectors explicitly is told why it got keywords.
        found = await m.stub.Search(
            memory_pb2.SearchRequest(scope=scope(), query="boat", mode="vector")
        )
        assert found.mode == "keyword" and "SB_EMBEDDING_PROVIDER=none" in found.degraded
        assert found.hits[0].text == "The boat is called Marigold"
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await m.stub.Embed(memory_pb2.EmbedRequest(texts=["anything"]))
        assert err.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "SB_EMBEDDING_PROVIDER=none" in (err.value.details() or "")


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_provider_set_later_embeds_what_was_stored_without_one(
    nats_url: str, database_url: str, tmp_path: Path, engine: str
) -> None:
    async with memory_service(
        nats_url,
        database_url,
        tmp_path,
        SB_QDRANT_LOCAL_ENGINE=engine,
        SB_EMBEDDING_PROVIDER="none",
        SB_REPAIR_INTERVAL_S="0.2",  # would repair, if keyword-only memory had anything to do
    ) as m:
        await m.stub.Upsert(
            memory_pb2.UpsertRequest(scope=scope(), items=[note("The dentist is on Elm Street")])
        )
        await asyncio.sleep(0.5)
    with FakeEmbeddings(dimension=384, require_key="emb-key") as embeddings:
        async with memory_service(
            nats_url,
            database_url,
            tmp_path,
            SB_QDRANT_LOCAL_ENGINE=engine,
            SB_EMBEDDING_PROVIDER="openai",
            SB_EMBEDDING_BASE_URL=embeddings.base_url,
            SB_EMBEDDING_API_KEY="emb-key",
            SB_REPAIR_INTERVAL_S="0.2",
        ) as m:
            deadline = asyncio.get_running_loop().time() + 30
            while True:
                found = await m.stub.Search(
                    memory_pb2.SearchRequest(scope=scope(), query="dentist street", mode="vector")
                )
                assert found.mode == "vector" and not found.degraded, found
                if found.hits and "Elm Street" in found.hits[0].text:
                    break
                assert asyncio.get_running_loop().time() < deadline, "never embedded"
                await asyncio.sleep(0.1)
