"""Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}; a backend's gRPC
error becomes one by :func:`backend_error`, the one mapper every route uses."""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from switchboard.errors import InvalidSessionKey
from switchboard.errors_map import Backend, http_error
from switchboard.sessions import validate_session_key

from .conversations import BusUnavailable

log = logging.getLogger(__name__)
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable",
    504: "timeout_error",
}


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, code: str | None = None, param: str | None = None
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param


def checked_session_key(key: str, param: str = "key") -> str:
    """``key`` if it is a valid session key, else a 400 naming the parameter."""
    try:
        return validate_session_key(key)
    except InvalidSessionKey as exc:
        raise ApiError(400, f"Invalid session key: {exc}", param=param) from exc


NOT_FOUND, INVALID = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT
# The backends: their names in a fixed answer ("The scheduler is unavailable..."), the statuses
# their servicers refuse with caller-safe text, the codes callers match on. The agent's
# refusals differ by call: each route names its own.
AGENT = Backend("the agent", unavailable="The agent service is not available; try again shortly.")
MEMORY = Backend(
    "the memory service",  # its UNAVAILABLE (the embedding provider) gets the fixed text
    frozenset({NOT_FOUND, INVALID}),
    {NOT_FOUND: "memory_not_found"},
)
ROUTER = Backend("the router", frozenset({NOT_FOUND, INVALID}), {NOT_FOUND: "pairing_not_found"})
SCHEDULER = Backend(
    "the scheduler",
    frozenset({NOT_FOUND, INVALID, grpc.StatusCode.ALREADY_EXISTS}),
    {NOT_FOUND: "job_not_found", grpc.StatusCode.ALREADY_EXISTS: "job_exists"},
)


def backend_error(
    exc: grpc.aio.AioRpcError,
    backend: Backend,
    call: str,
    ours: Collection[grpc.StatusCode] | None = None,
    marked: bool = False,
) -> ApiError:
    """The HTTP error for ``backend``'s failed gRPC ``call``, by the one table
    (:func:`switchboard.errors_map.http_error`): the details of the statuses in ``ours`` (those
    the backend refuses with a message written for callers; default the backend's) pass with
    their HTTP status; anything else is logged and answered 503/504 with a fixed text."""
    error = http_error(exc, backend, call, ours, marked=marked, logger=log)
    return ApiError(error.status, error.message, code=error.code)


def error_body(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": ERROR_TYPES.get(status, "api_error"),
            "param": param,
            "code": code,
        }
    }


_SOURCES = ("body", "query", "path", "header")


def _parameter(error: Any) -> str | None:
    """The request parameter an error is about (``messages.0.role``, ``limit``): not where it
    came from (body, query...), not pydantic's union member tags (``str-enum[QueueMode]``),
    nothing for a body that is not JSON at all."""
    if error.get("type") == "json_invalid":
        return None
    loc = [str(x) for x in error.get("loc", ())]
    if loc and loc[0] in _SOURCES:
        loc = loc[1:]
    return ".".join(part for part in loc if "[" not in part) or None


def _describe(errors: list[Any]) -> tuple[str, str | None]:
    parts = []
    param = None
    for e in errors[:5]:
        where = _parameter(e)
        param = param or where
        parts.append(f"{where or 'body'}: {e.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(parts), param


def install_error_handlers(app: FastAPI) -> None:
    async def on_api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        body = error_body(exc.status, exc.message, exc.code, exc.param)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(body, status_code=exc.status, headers=headers)

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        message, param = _describe(list(exc.errors()))
        return JSONResponse(error_body(400, message, "invalid_request", param), status_code=400)

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = "request_too_large" if exc.status_code == 413 else None
        return JSONResponse(
            error_body(exc.status_code, str(exc.detail), code), status_code=exc.status_code
        )

    async def on_bus_down(_: Request, exc: Exception) -> JSONResponse:
        message = "The message bus is not available right now; nothing was accepted. Retry shortly."
        return JSONResponse(error_body(503, message, "bus_unavailable"), status_code=503)

    app.add_exception_handler(BusUnavailable, on_bus_down)
    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
