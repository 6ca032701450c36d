"""A fake OpenAI-compatible transcription server (``POST /v1/audio/transcriptions``, the real
multipart wire format: ``file``, ``model``, optional ``language``, ``prompt`` and
``response_format``), so the media service's transcriber runs through the real ``openai`` SDK.

It answers ``{"text": ...}`` (``response_format`` json, the default) or the bare text (text):
the text scripted for the file's sha256 in ``texts``, else ``default_text``. ``down = True``
answers 503 in OpenAI's error shape; ``require_key`` answers 401 to any other key."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.fakes.server_thread import ServerThread


@dataclass(frozen=True)
class Upload:
    model: str
    filename: str
    content_type: str
    size: int
    sha256: str
    language: str
    prompt: str


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status
    )


class FakeTranscription:
    def __init__(self, require_key: str | None = None, default_text: str = "") -> None:
        self.require_key = require_key
        self.default_text = default_text
        self.texts: dict[str, str] = {}
        self.down = False
        self.uploads: list[Upload] = []
        self._lock = threading.Lock()
        app = Starlette(
            routes=[Route("/v1/audio/transcriptions", self._transcribe, methods=["POST"])]
        )
        self._server = ServerThread(app, "fake-transcription")
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def seen(self) -> list[Upload]:
        with self._lock:
            return list(self.uploads)

    async def _transcribe(self, request: Request) -> Response:
        key = request.headers.get("authorization")
        if self.require_key is not None and key != f"Bearer {self.require_key}":
            return _error(401, "Incorrect API key provided", "invalid_request_error")
        if self.down:
            return _error(503, "The server is overloaded", "server_error")
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            return _error(400, "Expected multipart/form-data", "invalid_request_error")
        form = await request.form()
        file, model = form.get("file"), form.get("model")
        if not isinstance(file, UploadFile) or not isinstance(model, str) or not model:
            return _error(400, "file and model are required", "invalid_request_error")
        data = await file.read()
        digest = hashlib.sha256(data).hexdigest()
        upload = Upload(
            model=model,
            filename=file.filename or "",
            content_type=file.content_type or "",
            size=len(data),
            sha256=digest,
            language=str(form.get("language") or ""),
            prompt=str(form.get("prompt") or ""),
        )
        with self._lock:
            self.uploads.append(upload)
        text = self.texts.get(digest) or self.default_text or f"transcript of {len(data)} bytes"
        if form.get("response_format") == "text":
            return PlainTextResponse(text)
        return JSONResponse({"text": text})

    def __enter__(self) -> FakeTranscription:
        self.port = self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
