"""The agent's calls to the memory service: deadlines on each, and gRPC failures as
:class:`MemoryUnavailable` / :class:`MemoryRefused` with a text a model or a log can read."""

from __future__ import annotations

import contextlib

import grpc

from switchboard.v1 import memory_pb2, memory_pb2_grpc

TIMEOUT_S = 10.0
SYNC_TIMEOUT_S = 60.0  # a turn is embedded before it is stored


class MemoryUnavailable(Exception):
    """The memory service did not answer (down, starting, overloaded)."""


class MemoryRefused(Exception):
    """The memory service refused the request; the message is its reason."""


class NoMemoryYet(Exception):
    """Nothing was ever stored for this agent."""


async def call(
    method: grpc.aio.UnaryUnaryMultiCallable | grpc.aio.StreamUnaryMultiCallable,
    request: object,
    timeout: float,
) -> object:
    try:
        return await method(request, timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        code = exc.code()
        if code == grpc.StatusCode.NOT_FOUND:
            raise NoMemoryYet(exc.details() or "nothing stored") from None
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            raise MemoryRefused(exc.details() or "invalid request") from None
        raise MemoryUnavailable(f"memory service: {code.name}") from None


class MemoryClient:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = memory_pb2_grpc.MemoryStub(channel)

    async def search(self, agent: str, user: str, query: str, k: int) -> memory_pb2.SearchResponse:
        request = memory_pb2.SearchRequest(
            scope=memory_pb2.MemoryScope(agent=agent, user=user), query=query, k=k
        )
        found = await call(self.stub.Search, request, TIMEOUT_S)
        assert isinstance(found, memory_pb2.SearchResponse)
        return found

    async def get(
        self, agent: str, user: str, path: str, from_line: int, lines: int
    ) -> memory_pb2.GetResponse:
        request = memory_pb2.GetRequest(
            scope=memory_pb2.MemoryScope(agent=agent, user=user),
            path=path,
            from_line=from_line,
            lines=lines,
        )
        got = await call(self.stub.Get, request, TIMEOUT_S)
        assert isinstance(got, memory_pb2.GetResponse)
        return got

    async def store(
        self, agent: str, user: str, text: str, session_key: str
    ) -> memory_pb2.UpsertResponse:
        request = memory_pb2.UpsertRequest(
            scope=memory_pb2.MemoryScope(agent=agent, user=user),
            items=[memory_pb2.MemoryItem(text=text, source="note", session_key=session_key)],
        )
        done = await call(self.stub.Upsert, request, TIMEOUT_S)
        assert isinstance(done, memory_pb2.UpsertResponse)
        return done

    async def sync_turns(
        self, agent: str, user: str, session_key: str, turns: list[memory_pb2.SessionTurn]
    ) -> None:
        request = memory_pb2.SyncSessionRequest(
            scope=memory_pb2.MemoryScope(agent=agent, user=user),
            session_key=session_key,
            turns=turns,
        )
        await call(self.stub.SyncSession, request, SYNC_TIMEOUT_S)

    async def ingest_file(self, agent: str, path: str, body: bytes) -> None:
        header = memory_pb2.DocumentHeader(
            scope=memory_pb2.MemoryScope(agent=agent),
            path=path,
            mime="text/markdown",
            source="file",
        )
        chunks = [memory_pb2.IngestChunk(header=header, data=body)]
        await call(self.stub.IngestDocument, iter(chunks), SYNC_TIMEOUT_S)

    async def forget_file(self, agent: str, path: str) -> None:
        request = memory_pb2.DeleteRequest(scope=memory_pb2.MemoryScope(agent=agent), path=path)
        with contextlib.suppress(NoMemoryYet):  # nothing stored: nothing to forget
            await call(self.stub.Delete, request, TIMEOUT_S)
