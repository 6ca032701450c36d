"""The error seam: every domain kind reaches a gRPC caller as its status with the message we
wrote, and the gateway's mapper turns that into the table's HTTP status; anything else is
INTERNAL with a fixed text, logged once, its text (a secret, a path) never sent. A real
``GrpcServer`` (token and tracing interceptors included) and a real client channel."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from switchboard import errors, rpc
from switchboard.errors import DomainError, ErrorKind
from switchboard.errors_map import STATUSES, Backend, grpc_errors, http_error

TOKEN = "test-service-token-errors-0123456789"
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
FIXED = "the test service failed"
BACKEND = Backend("the test service")
KIND_CLASSES: dict[ErrorKind, type[DomainError]] = {
    ErrorKind.INVALID_ARGUMENT: errors.InvalidArgument,
    ErrorKind.NOT_FOUND: errors.NotFound,
    ErrorKind.ALREADY_EXISTS: errors.AlreadyExists,
    ErrorKind.FAILED_PRECONDITION: errors.FailedPrecondition,
    ErrorKind.PERMISSION_DENIED: errors.PermissionDenied,
    ErrorKind.RESOURCE_EXHAUSTED: errors.ResourceExhausted,
    ErrorKind.UNAVAILABLE: errors.Unavailable,
    ErrorKind.UNIMPLEMENTED: errors.Unimplemented,
}
EXPECTED = {  # kind -> (gRPC status, HTTP status), written out so a changed table is seen
    ErrorKind.INVALID_ARGUMENT: (grpc.StatusCode.INVALID_ARGUMENT, 400),
    ErrorKind.NOT_FOUND: (grpc.StatusCode.NOT_FOUND, 404),
    ErrorKind.ALREADY_EXISTS: (grpc.StatusCode.ALREADY_EXISTS, 409),
    ErrorKind.FAILED_PRECONDITION: (grpc.StatusCode.FAILED_PRECONDITION, 409),
    ErrorKind.PERMISSION_DENIED: (grpc.StatusCode.PERMISSION_DENIED, 403),
    ErrorKind.RESOURCE_EXHAUSTED: (grpc.StatusCode.RESOURCE_EXHAUSTED, 413),
    ErrorKind.UNAVAILABLE: (grpc.StatusCode.UNAVAILABLE, 503),
    ErrorKind.UNIMPLEMENTED: (grpc.StatusCode.UNIMPLEMENTED, 501),
}


class ServiceGone(errors.Unavailable):
    """A service's own error whose message names internals: the caller gets ``public``."""

    public = "the store is unavailable"


statuses = grpc_errors(FIXED)


class Seam:
    """Handlers (bytes in, bytes out) that raise what the request names."""

    @statuses
    async def unary(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if request == b"abort":
            await context.abort(grpc.StatusCode.DATA_LOSS, "aborted by the handler")
        return raise_for(request.decode())

    @statuses
    async def stream(
        self, request: bytes, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        yield b"first"
        raise_for(request.decode())
        yield b"never"

    def handlers(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            "test.Seam",
            {
                "Unary": grpc.unary_unary_rpc_method_handler(self.unary),
                "Stream": grpc.unary_stream_rpc_method_handler(self.stream),
            },
        )


def raise_for(what: str) -> bytes:
    """Raise the error ``what`` names: a kind's value, ``secret``, ``gone``, ``tagged``..."""
    if what == "secret":
        raise RuntimeError(f"connect to postgres://admin:{SECRET}@db.internal failed")
    if what == "gone":
        raise ServiceGone(f"qdrant at 10.0.0.7:6333 refused ({SECRET})")
    if what == "tagged":
        raise errors.PermissionDenied("the policy denies it", code="policy_denied")
    if what == "ok":
        return b"ok"
    raise KIND_CLASSES[ErrorKind(what)](f"refused as {what}: the message we wrote")


@pytest.fixture
async def target() -> AsyncIterator[str]:
    server = rpc.GrpcServer(token=TOKEN)
    server.server.add_generic_rpc_handlers((Seam().handlers(),))
    port = server.bind("127.0.0.1", 0)
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


async def call_unary(target: str, what: str) -> grpc.aio.AioRpcError:
    async with rpc.channel(target, TOKEN) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await ch.unary_unary("/test.Seam/Unary")(what.encode(), timeout=10)
    return caught.value


def logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "switchboard.errors_map"]


def test_the_table_covers_every_kind_as_written() -> None:
    actual = {kind: (status.grpc, status.http) for kind, status in STATUSES.items()}
    assert actual == EXPECTED
    assert set(KIND_CLASSES) == set(ErrorKind)


@pytest.mark.parametrize("kind", list(ErrorKind), ids=lambda k: k.value)
async def test_each_kind_reaches_grpc_and_http_callers_with_our_message(
    target: str, kind: ErrorKind, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "switchboard.errors_map")
    code, http = EXPECTED[kind]
    failed = await call_unary(target, kind.value)
    message = f"refused as {kind.value}: the message we wrote"
    assert (failed.code(), failed.details()) == (code, message)
    answer = http_error(failed, BACKEND, "Seam.Unary", {code})
    assert (answer.status, answer.message, answer.code) == (http, message, None)
    assert logged(caplog) == []  # a refusal we wrote is not an incident


async def test_a_kind_not_declared_ours_gets_the_fixed_text(target: str) -> None:
    """The gateway passes only the statuses a backend refuses with; the same status from it
    otherwise is answered with the fixed text."""
    failed = await call_unary(target, ErrorKind.NOT_FOUND.value)
    answer = http_error(failed, BACKEND, "Seam.Unary", {grpc.StatusCode.INVALID_ARGUMENT})
    assert (answer.status, answer.message) == (
        503,
        "The test service is unavailable; try again shortly.",
    )


async def test_an_unexpected_exception_is_internal_with_the_fixed_text_logged_once(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    failed = await call_unary(target, "secret")
    assert (failed.code(), failed.details()) == (grpc.StatusCode.INTERNAL, FIXED)
    answer = http_error(failed, BACKEND, "Seam.Unary", set(STATUSES[k].grpc for k in ErrorKind))
    assert (answer.status, answer.message) == (
        503,
        "The test service is unavailable; try again shortly.",
    )
    for text in (failed.details(), str(failed.trailing_metadata()), answer.message):
        assert SECRET not in text and "postgres" not in text
    [record] = [r for r in logged(caplog) if r.exc_info]
    assert record.getMessage() == "Seam.unary failed"
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and SECRET in str(record.exc_info[1])
    # once: no other record of the call carries the exception or its text
    others = [r for r in caplog.records if r is not record]
    assert not any(r.exc_info for r in others)
    assert not any(SECRET in r.getMessage() for r in others)


async def test_a_public_text_stands_in_for_a_message_naming_internals(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "switchboard.errors_map")
    failed = await call_unary(target, "gone")
    assert (failed.code(), failed.details()) == (grpc.StatusCode.UNAVAILABLE, ServiceGone.public)
    assert SECRET not in str(failed.trailing_metadata())
    [record] = logged(caplog)
    assert record.levelno == logging.WARNING and "10.0.0.7" in record.getMessage()


async def test_a_refusal_code_travels_and_marked_routes_need_it(target: str) -> None:
    failed = await call_unary(target, "tagged")
    denied = grpc.StatusCode.PERMISSION_DENIED
    answer = http_error(failed, BACKEND, "Seam.Unary", {denied}, marked=True)
    assert (answer.status, answer.message, answer.code) == (
        403,
        "the policy denies it",
        "policy_denied",
    )
    untagged = await call_unary(target, ErrorKind.PERMISSION_DENIED.value)
    answer = http_error(untagged, BACKEND, "Seam.Unary", {denied}, marked=True)
    assert answer.status == 503  # the same status without the tag: not taken as a refusal


async def test_an_abort_made_by_the_handler_passes_unchanged(
    target: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A handler that aborts itself keeps its status and text: not turned into INTERNAL."""
    caplog.set_level(logging.DEBUG, "switchboard.errors_map")
    failed = await call_unary(target, "abort")
    assert (failed.code(), failed.details()) == (
        grpc.StatusCode.DATA_LOSS,
        "aborted by the handler",
    )
    assert logged(caplog) == []


@pytest.mark.parametrize(
    ("what", "code", "details"),
    [
        ("not_found", grpc.StatusCode.NOT_FOUND, "refused as not_found: the message we wrote"),
        ("secret", grpc.StatusCode.INTERNAL, FIXED),
    ],
)
async def test_a_server_stream_ends_with_the_status_after_what_it_sent(
    target: str, what: str, code: grpc.StatusCode, details: str
) -> None:
    received: list[Any] = []
    async with rpc.channel(target, TOKEN) as ch:
        call = ch.unary_stream("/test.Seam/Stream")(what.encode(), timeout=10)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for item in call:
                received.append(item)
    assert received == [b"first"]
    assert (caught.value.code(), caught.value.details()) == (code, details)
