"""Fixtures of the shared library's tests (the real servers come from tests/support/servers.py,
loaded by the root conftest)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from tests.support.otlp import OtlpReceiver, ReceivedSpan, _Collector


class _KindCollector(_Collector):
    """The receiver's collector, also noting each span's kind by span id (which
    :class:`ReceivedSpan` does not carry)."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: dict[str, int] = {}

    def Export(self, request: Any, context: Any) -> Any:
        with self.lock:
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.kinds[s.span_id.hex()] = s.kind
        return super().Export(request, context)


class Receiver(OtlpReceiver):
    """:class:`OtlpReceiver` (a real OTLP/gRPC receiver) that knows span kinds too."""

    def __init__(self) -> None:  # OtlpReceiver.__init__ with the kind-noting collector
        self.collector = self.kinds_collector = _KindCollector()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self.collector, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def kind(self, span: ReceivedSpan) -> int:
        with self.collector.lock:
            return self.kinds_collector.kinds.get(span.span_id, -1)

    async def until(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 30.0
    ) -> list[ReceivedSpan]:
        """Wait (without blocking the event loop) until ``predicate(spans)`` holds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            spans = self.spans()
            if predicate(spans):
                return spans
            await asyncio.sleep(0.05)
        return self.spans()


@pytest.fixture
def otlp() -> Iterator[Receiver]:
    """A real OTLP/gRPC trace receiver on a free port."""
    receiver = Receiver()
    with receiver:
        yield receiver


async def eventually(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Whether ``predicate`` became true within ``timeout`` (checked every 20 ms)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True
