"""Bounded JSON for the bodies the gateway does not parse itself: FastAPI's (the OpenAI API, the
sessions, cron, memory, approvals and pairing APIs, ``/tools/invoke``), the A2A SDK's
(``request.json()`` at ``/a2a``) and the MCP SDK's (``pydantic_core.from_json`` at ``/mcp``).

One ASGI middleware, inside the token check, reads such a body once and parses it with
``switchboard.jsonsafe`` before the route does: a document nested deeper than
``jsonsafe.MAX_DEPTH`` levels, or not JSON at all, is answered 400 here, in the shape of the
route's family (OpenAI's ``{"error": {...}}``; a JSON-RPC parse error for ``/a2a`` and
``/mcp``), and never reaches a parser that recurses (CPython's stops near a thousand levels
with ``RecursionError``) or a route that walks what it got. Why here and not in each route: it
is the one place in front of three parsers, two of them in SDKs the gateway does not own; the
cost is a second parse of bodies that are at most ``SB_MAX_REQUEST_BYTES``.

Not checked here: the channel webhooks and ``/hooks/*`` (they parse their bodies themselves
through ``jsonsafe``, after their own signature or token check), a memory document (the body
is the document, not a request) and WebSocket frames (WebChat parses each through
``jsonsafe``)."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from switchboard import jsonsafe

from .errors import error_body

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON_RPC_PATHS = ("/a2a", "/mcp")  # always JSON, whatever the Content-Type says
PARSE_ERROR = -32700  # JSON-RPC 2.0
# Paths that parse their own bodies (through jsonsafe) or take bodies that are not requests.
OWN_PARSERS = ("/channels/", "/hooks/", "/api/memory/documents")


def _content_type(scope: Scope) -> str:
    for key, value in scope["headers"]:
        if key == b"content-type":
            return value.decode("latin-1").split(";")[0].strip().lower()
    return ""


def is_json(content_type: str) -> bool:
    """What FastAPI parses as JSON: ``application/json`` and ``application/<x>+json``."""
    kind, _, subtype = content_type.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def checked(scope: Scope) -> bool:
    """Whether the body of this request is parsed as JSON by what serves it."""
    if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
        return False
    path: str = scope["path"]
    if path.startswith(OWN_PARSERS):
        return False
    return path in JSON_RPC_PATHS or is_json(_content_type(scope))


def refusal(path: str, exc: jsonsafe.JsonRefused) -> JSONResponse:
    """The 400 of the route's family for a refused body (the reason never repeats it)."""
    if path in JSON_RPC_PATHS:
        error = {"code": PARSE_ERROR, "message": f"Parse error: {exc}"}
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=400)
    body = error_body(400, f"Invalid request: body: {exc}", "invalid_json")
    return JSONResponse(body, status_code=400)


class JsonBodies:
    """ASGI middleware: a JSON body is parsed with :func:`jsonsafe.loads` before the app sees
    it (then handed on unchanged), and refused with 400 when jsonsafe refuses it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not checked(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:  # bounded: BodyLimit (outside) stops a body past SB_MAX_REQUEST_BYTES
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body was in: nothing to answer
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body:  # an empty body is the route's to refuse (a missing body, in its words)
            try:
                jsonsafe.loads(body, max_bytes=self.max_bytes)
            except jsonsafe.JsonRefused as exc:
                await refusal(scope["path"], exc)(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: a disconnect, for streaming responses

        await self.app(scope, replay, send)
