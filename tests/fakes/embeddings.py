"""A fake OpenAI-compatible embeddings server (``POST /v1/embeddings``, the real wire format), so
the memory service's ``openai`` provider runs through the real ``openai`` SDK.

Vectors are deterministic bags of hashed words (texts sharing words are close), unit length.
``down = True`` makes it answer 503 in OpenAI's error shape, as an overloaded provider does;
``require_key`` answers 401 to any other key."""

from __future__ import annotations

import hashlib
import math
import re
import threading
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.server_thread import ServerThread

_WORD = re.compile(r"\w+")


def fake_vector(text: str, dimension: int) -> list[float]:
    vector = [0.0] * dimension
    for word in _WORD.findall(text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % dimension] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status
    )


class FakeEmbeddings:
    def __init__(self, dimension: int = 64, require_key: str | None = None) -> None:
        self.dimension = dimension
        self.require_key = require_key
        self.down = False
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        app = Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])
        self._server = ServerThread(app, "fake-embeddings")
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def texts_seen(self) -> list[str]:
        with self._lock:
            return [t for r in self.requests for t in r["input"]]

    async def _embeddings(self, request: Request) -> JSONResponse:
        key = request.headers.get("authorization")
        if self.require_key is not None and key != f"Bearer {self.require_key}":
            return _error(401, "Incorrect API key provided", "invalid_request_error")
        if self.down:
            return _error(503, "The server is overloaded", "server_error")
        body = await request.json()
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            return _error(400, "input must be a string or a list of strings", "invalid_request")
        with self._lock:
            self.requests.append({"model": body.get("model"), "input": inputs})
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t, self.dimension)}
            for i, t in enumerate(inputs)
        ]
        tokens = sum(len(_WORD.findall(t)) for t in inputs)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def __enter__(self) -> FakeEmbeddings:
        self.port = self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
