"""A fake WhatsApp Cloud API for tests: the Graph API over real HTTP (a uvicorn thread), reached
by the adapter's httpx client through its ``api_base``, and signed webhook events as Meta sends
them::

    with FakeWhatsApp() as wa:
        adapter = WhatsAppAdapter(wa.token, wa.app_secret, wa.verify_token, wa.phone_number_id,
                                  wa.base_url)
        wa.outside_window.add("15550001111")  # error 131047 for that number
        [sent] = wa.wait_for_messages(1)

Graph API (``Authorization: Bearer <token>``, else 401 with error code 190):
``POST /v21.0/<phone-number-id>/messages`` (a message: text, image, audio, document by media id
or link; or a read receipt ``{"status": "read", "message_id", "typing_indicator"?}``),
``POST /v21.0/<phone-number-id>/media`` (multipart upload, answers the media id),
``GET /v21.0/<media-id>`` (the media's URL and type) and ``GET /media/<media-id>`` (its bytes,
bearer token required). Errors are Graph's: ``{"error": {"message", "type", "code",
"error_data": {"details"}, "fbtrace_id"}}``; ``fail_next`` scripts any of them (429, 5xx).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.server_thread import ServerThread

VERSION = "v21.0"
TEXT_LIMIT = 4096
WINDOW_MESSAGE = "Re-engagement message"
WINDOW_DETAILS = (
    "Message failed to send because more than 24 hours have passed since the customer last "
    "replied to this number."
)


def signature(body: bytes, app_secret: str) -> str:
    """The ``X-Hub-Signature-256`` header Meta sends with ``body``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def event(
    phone_number_id: str, messages: list[dict[str, Any]] | None = None, **value: Any
) -> bytes:
    """A ``whatsapp_business_account`` webhook body carrying ``messages`` (and ``statuses``...)."""
    messages = messages or []
    change_value = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": phone_number_id},
        "contacts": [
            {"profile": {"name": "Someone"}, "wa_id": m["from"]} for m in messages if "from" in m
        ],
        "messages": messages,
        **value,
    }
    body = {
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA0", "changes": [{"field": "messages", "value": change_value}]}],
    }
    return json.dumps(body).encode()


def text_message(sender: str, text: str, message_id: str = "") -> dict[str, Any]:
    return {
        "from": sender,
        "id": message_id or f"wamid.{uuid.uuid4().hex}",
        "timestamp": str(int(time.time())),
        "type": "text",
        "text": {"body": text},
    }


def media_message(
    sender: str, kind: str, media_id: str, mime: str, message_id: str = "", **extra: Any
) -> dict[str, Any]:
    """An image, audio (``voice=True`` for a voice note) or document message."""
    body = {"id": media_id, "mime_type": mime, "sha256": "x", **extra}
    return {
        "from": sender,
        "id": message_id or f"wamid.{uuid.uuid4().hex}",
        "timestamp": str(int(time.time())),
        "type": kind,
        kind: body,
    }


@dataclass(frozen=True)
class Sent:
    """A message the messages endpoint accepted (its JSON body) and the id it answered."""

    body: dict[str, Any]
    wamid: str


@dataclass(frozen=True)
class Read:
    message_id: str
    typing: bool


@dataclass
class _Media:
    data: bytes
    mime: str
    name: str = ""


@dataclass
class _Failure:
    status: int
    code: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)


class FakeWhatsApp:
    def __init__(self, phone_number_id: str = "1098765432") -> None:
        self.token = f"EAAG{uuid.uuid4().hex}"
        self.app_secret = uuid.uuid4().hex
        self.verify_token = uuid.uuid4().hex
        self.phone_number_id = phone_number_id
        self.outside_window: set[str] = set()  # numbers whose 24-hour window is closed
        self.port = 0
        self.media: dict[str, _Media] = {}
        self._sent: list[Sent] = []
        self._reads: list[Read] = []
        self._calls: list[dict[str, Any]] = []  # every message call's body, refused or not
        self._failures: list[_Failure] = []
        self._cond = threading.Condition()
        base = f"/{VERSION}"
        self.app = Starlette(
            routes=[
                Route(base + "/{number}/messages", self._messages, methods=["POST"]),
                Route(base + "/{number}/media", self._upload, methods=["POST"]),
                Route(base + "/{media_id}", self._media_info, methods=["GET"]),
                Route("/media/{media_id}", self._download, methods=["GET"]),
            ]
        )
        self._server = ServerThread(self.app, "fake-whatsapp")

    def __enter__(self) -> FakeWhatsApp:
        self.port = self._server.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{VERSION}"

    # --- scripting and what happened --------------------------------------------------------

    def add_media(self, data: bytes, mime: str) -> str:
        """A file a user sent: its media id."""
        media_id = str(uuid.uuid4().int)[:16]
        self.media[media_id] = _Media(data, mime)
        return media_id

    def fail_next(
        self, status: int, code: int, message: str = "", retry_after: int | None = None
    ) -> None:
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        with self._cond:
            self._failures.append(_Failure(status, code, message or f"error {code}", headers))

    def sign(self, body: bytes) -> str:
        return signature(body, self.app_secret)

    @property
    def sent(self) -> list[Sent]:
        with self._cond:
            return list(self._sent)

    @property
    def calls(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._calls)

    @property
    def reads(self) -> list[Read]:
        with self._cond:
            return list(self._reads)

    def wait_for_messages(self, n: int, timeout: float = 20.0) -> list[Sent]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._sent) >= n, timeout):
                raise AssertionError(f"{len(self._sent)} WhatsApp messages sent, wanted {n}")
            return list(self._sent)

    # --- the Graph API ----------------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        return hmac.compare_digest(request.headers.get("authorization", ""), f"Bearer {self.token}")

    def _problem(self, request: Request, number: str | None = None) -> Response | None:
        if not self._authorized(request):
            return _error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        if number is not None and number != self.phone_number_id:
            return _error(400, 100, f"Unsupported post request. Object with ID '{number}'")
        with self._cond:
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            return _error(failure.status, failure.code, failure.message, failure.headers)
        return None

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        with self._cond:
            self._calls.append(body)
        problem = self._problem(request, request.path_params["number"])
        if problem is not None:
            return problem
        if body.get("messaging_product") != "whatsapp":
            return _error(400, 100, "The parameter messaging_product is required.")
        if body.get("status") == "read":
            with self._cond:
                self._reads.append(Read(str(body["message_id"]), "typing_indicator" in body))
                self._cond.notify_all()
            return JSONResponse({"success": True})
        to = str(body.get("to", ""))
        if to in self.outside_window:
            return _error(400, 131047, WINDOW_MESSAGE, details=WINDOW_DETAILS)
        kind = body.get("type")
        content = body.get(kind) if isinstance(kind, str) else None
        if not isinstance(content, dict):
            return _error(400, 100, "Invalid parameter")
        if kind == "text" and not 0 < len(str(content.get("body", ""))) <= TEXT_LIMIT:
            return _error(400, 100, "Param text['body'] must be at most 4096 characters long.")
        if kind != "text" and content.get("id") not in self.media and "link" not in content:
            return _error(400, 131053, "Media upload error")
        wamid = f"wamid.{uuid.uuid4().hex}"
        with self._cond:
            self._sent.append(Sent(body, wamid))
            self._cond.notify_all()
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": wamid}],
            }
        )

    async def _upload(self, request: Request) -> Response:
        problem = self._problem(request, request.path_params["number"])
        if problem is not None:
            return problem
        form = await request.form()
        file = form.get("file")
        if form.get("messaging_product") != "whatsapp" or file is None or isinstance(file, str):
            return _error(400, 100, "Invalid parameter")
        media_id = str(uuid.uuid4().int)[:16]
        self.media[media_id] = _Media(await file.read(), str(form.get("type")), file.filename or "")
        return JSONResponse({"id": media_id})

    async def _media_info(self, request: Request) -> Response:
        problem = self._problem(request)
        if problem is not None:
            return problem
        media_id = request.path_params["media_id"]
        found = self.media.get(media_id)
        if found is None:
            return _error(400, 100, f"Unsupported get request. Object with ID '{media_id}'")
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "url": f"http://127.0.0.1:{self.port}/media/{media_id}",
                "mime_type": found.mime,
                "sha256": hashlib.sha256(found.data).hexdigest(),
                "file_size": len(found.data),
                "id": media_id,
            }
        )

    async def _download(self, request: Request) -> Response:
        if not self._authorized(request):
            return Response(status_code=401)
        found = self.media.get(request.path_params["media_id"])
        if found is None:
            return Response(status_code=404)
        return Response(found.data, media_type=found.mime)


def _error(
    status: int,
    code: int,
    message: str,
    headers: dict[str, str] | None = None,
    details: str = "",
) -> JSONResponse:
    error: dict[str, Any] = {
        "message": message,
        "type": "OAuthException",
        "code": code,
        "fbtrace_id": uuid.uuid4().hex[:20],
    }
    if details:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    return JSONResponse({"error": error}, status_code=status, headers=headers)
