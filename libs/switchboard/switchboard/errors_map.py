"""The one seam between domain errors and what callers get: the table from an error's kind to
its gRPC and HTTP status, the decorator every servicer method wears, and the function that
turns a backend's gRPC error into an HTTP status and message for the gateway.

Why one place: a refusal's status and text were translated by hand in each servicer and in
each gateway route, and drifted (one servicer let unexpected exceptions leak as UNKNOWN with
their text). Here, a refusal we wrote (a :class:`~switchboard.errors.DomainError`) reaches the
caller with its message; anything else is logged once and answered with a fixed text."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import grpc

from .errors import DomainError, ErrorKind

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
REFUSAL_KEY = "sb-error"  # trailing metadata: the refusal's machine-readable code


@dataclass(frozen=True)
class Status:
    grpc: grpc.StatusCode
    http: int


# The table. FAILED_PRECONDITION is 409 (the state conflicts: "already decided"), not
# Google's 400, as the gateway answered before; RESOURCE_EXHAUSTED is 413 because the only cap
# a service refuses over today is a size (media's TooLarge), not a rate.
STATUSES: dict[ErrorKind, Status] = {
    ErrorKind.INVALID_ARGUMENT: Status(grpc.StatusCode.INVALID_ARGUMENT, 400),
    ErrorKind.NOT_FOUND: Status(grpc.StatusCode.NOT_FOUND, 404),
    ErrorKind.ALREADY_EXISTS: Status(grpc.StatusCode.ALREADY_EXISTS, 409),
    ErrorKind.FAILED_PRECONDITION: Status(grpc.StatusCode.FAILED_PRECONDITION, 409),
    ErrorKind.PERMISSION_DENIED: Status(grpc.StatusCode.PERMISSION_DENIED, 403),
    ErrorKind.RESOURCE_EXHAUSTED: Status(grpc.StatusCode.RESOURCE_EXHAUSTED, 413),
    ErrorKind.UNAVAILABLE: Status(grpc.StatusCode.UNAVAILABLE, 503),
    ErrorKind.UNIMPLEMENTED: Status(grpc.StatusCode.UNIMPLEMENTED, 501),
}
_KIND_OF_CODE = {status.grpc: kind for kind, status in STATUSES.items()}


def kind_of(code: grpc.StatusCode) -> ErrorKind | None:
    """The domain kind a gRPC status stands for, if it is one of the table's."""
    return _KIND_OF_CODE.get(code)


async def _abort(
    exc: Exception, name: str, internal: str, context: grpc.aio.ServicerContext
) -> None:
    """Abort the call with ``exc``'s status: its message (or its class's ``public`` text) for
    a domain error, INTERNAL and ``internal`` for anything else, which is logged once with its
    stack here and nowhere else."""
    kind = getattr(type(exc), "kind", None) if isinstance(exc, DomainError) else None
    if isinstance(exc, DomainError) and isinstance(kind, ErrorKind):
        message = str(exc)
        if exc.public is not None:
            log.warning("%s refused: %s", name, message)
            message = exc.public
        if exc.code:
            context.set_trailing_metadata(((REFUSAL_KEY, exc.code),))
        await context.abort(STATUSES[kind].grpc, message)
    log.exception("%s failed", name, exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, internal)


def grpc_errors(internal: str) -> Callable[[F], F]:
    """A decorator for servicer methods (``(self, request, context)``; unary, client-streaming,
    or an async generator for server streaming): a :class:`DomainError` raised inside becomes
    its status with the message we wrote; ``grpc.aio.AbortError`` (an abort already made)
    passes; anything else is logged once and answered INTERNAL with ``internal``, a fixed text
    such as "the memory service failed" (never the exception's text)."""

    def decorate(method: F) -> F:
        name = method.__qualname__
        if inspect.isasyncgenfunction(method):

            @functools.wraps(method)
            async def stream(
                self: Any, request: Any, context: grpc.aio.ServicerContext
            ) -> AsyncIterator[Any]:
                try:
                    async for item in method(self, request, context):
                        yield item
                except grpc.aio.AbortError:
                    raise
                except Exception as exc:
                    await _abort(exc, name, internal, context)

            return cast(F, stream)

        @functools.wraps(method)
        async def unary(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                return await method(self, request, context)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                await _abort(exc, name, internal, context)
            raise AssertionError("unreachable: abort raises")

        return cast(F, unary)

    return decorate


@dataclass(frozen=True)
class Backend:
    """A gRPC service as the gateway sees it: its name for callers ("the scheduler"), the
    statuses its servicers refuse with caller-safe text (``ours``; a call may name others),
    the machine-readable code callers match on per status (``codes``), and the text for a
    failure that is not a refusal (``unavailable``; default "<Name> is unavailable; try again
    shortly.")."""

    name: str
    ours: frozenset[grpc.StatusCode] = frozenset()
    codes: Mapping[grpc.StatusCode, str] = field(default_factory=dict)
    unavailable: str = ""

    def down(self) -> str:
        return self.unavailable or f"{_capital(self.name)} is unavailable; try again shortly."

    def late(self) -> str:
        return f"{_capital(self.name)} did not answer in time."


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class HttpError:
    """What the gateway answers: the HTTP status, the message, the machine-readable code (the
    backend's ``sb-error`` tag, else the caller's own for that status, else none)."""

    status: int
    message: str
    code: str | None = None


def refusal_code(exc: grpc.aio.AioRpcError) -> str | None:
    """The code a servicer tagged its refusal with (``sb-error`` trailing metadata), if any."""
    for key, value in exc.trailing_metadata() or ():
        if key == REFUSAL_KEY:
            return str(value)
    return None


def http_error(
    exc: grpc.aio.AioRpcError,
    backend: Backend,
    call: str,
    ours: Collection[grpc.StatusCode] | None = None,
    *,
    marked: bool = False,
    logger: logging.Logger = log,
) -> HttpError:
    """The HTTP answer to ``backend``'s failed ``call``. Only the statuses in ``ours`` (default
    the backend's) are ones its servicers refuse with a message written for callers, so only
    their details pass (with the table's HTTP status); with ``marked``, only when the refusal
    also carries an ``sb-error`` tag, so that the same status from elsewhere (an interceptor,
    gRPC itself) is not mistaken for one. The machine-readable code is the refusal's own tag,
    else the backend's for that status. Anything
    else (gRPC's own text, which may name hosts or internals) is logged on ``logger`` (ERROR
    for a refused service credential, an operator's problem) and answered 504 or 503 with a
    fixed text."""
    code = exc.code()
    kind = kind_of(code)
    tag = refusal_code(exc)
    passed = backend.ours if ours is None else ours
    if code in passed and kind is not None and (not marked or tag is not None):
        message = exc.details() or code.name.lower().replace("_", " ")
        return HttpError(STATUSES[kind].http, message, tag or backend.codes.get(code))
    level = logging.ERROR if code == grpc.StatusCode.UNAUTHENTICATED else logging.WARNING
    logger.log(level, "%s: %s failed: %s: %s", backend.name, call, code.name, exc.details())
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return HttpError(504, backend.late())
    return HttpError(503, backend.down())
