"""Real little HTTP servers for the web tool tests, and fake web search providers.

:class:`WebServer` serves scripted :class:`Reply` values from a thread (stdlib ``http.server``),
on any local address (``127.0.0.2``, ``::1``...), optionally over TLS, and records every request
it receives::

    with WebServer("127.0.0.2", {"/": Reply(body="<p>hi</p>")}) as site:
        ... fetch site.url("/") ...
        assert site.requests[0].headers["host"] == ...

The fake providers (:func:`tavily`, :func:`brave`, :func:`searxng`) answer with the providers'
real response shapes so the real client code in ``web_search`` runs against them.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "MapResolver",
    "Reply",
    "Seen",
    "WebServer",
    "brave",
    "redirect",
    "searxng",
    "tavily",
]


@dataclass(frozen=True)
class Seen:
    """One request as the server received it (header names lower-cased)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes | str = b""
    content_type: str | None = "text/html; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)
    # Send the body without Content-Length (HTTP/1.0, ended by closing the connection).
    undeclared: bool = False


Handler = Callable[[Seen], Reply]


def redirect(location: str, status: int = 302) -> Reply:
    return Reply(status=status, content_type=None, headers={"Location": location})


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        seen = Seen(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=self.rfile.read(length) if length else b"",
        )
        owner = self.server.owner
        with owner.lock:
            owner.requests.append(seen)
            route = owner.routes.get(parts.path)
        reply = route(seen) if callable(route) else route or Reply(404, "not found", "text/plain")
        body = reply.body.encode() if isinstance(reply.body, str) else reply.body
        self.send_response(reply.status)
        if reply.content_type:
            self.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if not reply.undeclared:
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for start in range(0, len(body), 64 * 1024):
                self.wfile.write(body[start : start + 64 * 1024])
        except OSError:
            pass  # the client stopped reading (a size cap): that is what some tests check

    do_GET = do_POST = do_HEAD = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: WebServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up mid-response are expected here


class WebServer:
    """A threaded HTTP(S) server on ``host`` (an IPv4 or IPv6 address) and a free port."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        routes: Mapping[str, Reply | Handler] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.routes: dict[str, Reply | Handler] = dict(routes or {})
        self.requests: list[Seen] = []
        self.lock = threading.Lock()
        self._tls = tls
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_class = type("_BoundServer", (_Server,), {"address_family": family})
        self._server: _Server = server_class((host, 0), _Handler)
        self._server.owner = self
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/", host: str | None = None) -> str:
        name = host or (f"[{self.host}]" if ":" in self.host else self.host)
        scheme = "https" if self._tls else "http"
        return f"{scheme}://{name}:{self.port}{path}"

    def route(self, path: str, reply: Reply | Handler) -> None:
        with self.lock:
            self.routes[path] = reply

    def start(self) -> WebServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> WebServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MapResolver:
    """A resolver for the SSRF guard: names in ``mapping`` resolve to the given addresses (a
    list, or a callable giving the answer for the n-th lookup); every lookup is recorded."""

    def __init__(
        self,
        mapping: Mapping[str, Sequence[str] | Callable[[int], Sequence[str]]],
        fallback: Callable[[str, int], Awaitable[Sequence[str]]] | None = None,
    ) -> None:
        self.mapping = mapping
        self.fallback = fallback
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append(host)
        answer = self.mapping.get(host)
        if answer is None:
            if self.fallback is None:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return await self.fallback(host, port)
        if callable(answer):
            return answer(self.calls.count(host))
        return answer


def _json(data: Any) -> Reply:
    return Reply(body=json.dumps(data), content_type="application/json")


Hit = tuple[str, str, str]  # title, url, text


def tavily(hits: Sequence[Hit]) -> Handler:
    """``POST /search`` of the Tavily API."""

    def handle(seen: Seen) -> Reply:
        if seen.method != "POST":
            return Reply(405, "method not allowed", "text/plain")
        query = seen.json().get("query", "")
        results = [{"title": t, "url": u, "content": c, "score": 0.9} for t, u, c in hits]
        return _json({"query": query, "answer": None, "results": results, "response_time": 0.4})

    return handle


def brave(hits: Sequence[Hit]) -> Handler:
    """``GET /res/v1/web/search`` of the Brave Search API."""

    def handle(seen: Seen) -> Reply:
        query = seen.query.get("q", [""])[0]
        results = [
            {"type": "search_result", "title": t, "url": u, "description": d} for t, u, d in hits
        ]
        return _json(
            {
                "type": "search",
                "query": {"original": query},
                "web": {"type": "search", "results": results},
            }
        )

    return handle


def searxng(hits: Sequence[Hit]) -> Handler:
    """``GET /search?format=json`` of a SearXNG instance (403 without format=json, as an
    instance with the JSON format disabled answers)."""

    def handle(seen: Seen) -> Reply:
        if seen.query.get("format") != ["json"]:
            return Reply(403, "Forbidden", "text/html")
        results = [
            {"title": t, "url": u, "content": c, "engine": "duckduckgo", "score": 1.0}
            for t, u, c in hits
        ]
        return _json(
            {
                "query": seen.query.get("q", [""])[0],
                "number_of_results": len(results),
                "results": results,
                "answers": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    return handle
