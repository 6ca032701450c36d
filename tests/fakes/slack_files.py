"""Files of the fake Slack (:mod:`tests.fakes.slack`), as Slack's Web API handles them:

- uploads (what ``files_upload_v2`` does): ``files.getUploadURLExternal`` (``filename``,
  ``length``) answers an ``upload_url`` and a ``file_id``; the bytes are POSTed to that URL
  (answered ``200 OK - <length>``); ``files.completeUploadExternal`` (``files`` as JSON
  ``[{"id", "title"}]``, ``channel_id``, ``thread_ts``, ``initial_comment``) shares them in the
  channel. Errors are Slack's: ``invalid_arguments`` (no filename, a bad length),
  ``file_not_found`` (an id never issued), ``file_upload_not_completed`` (its bytes never
  arrived, or not ``length`` of them), ``channel_not_found``.
- downloads: :meth:`SlackFiles.serve` puts bytes at a ``url_private``
  (``GET /files-pri/<team>-<id>/<name>``); it answers only with the bot token as ``Authorization:
  Bearer``, else a 302 to the sign-in page, as files.slack.com does.
"""

from __future__ import annotations

import hmac
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response


@dataclass
class Upload:
    """A file uploaded (``data``) and, once completed, shared in ``channel``."""

    file_id: str
    filename: str
    length: int
    data: bytes | None = None
    title: str = ""
    channel: str = ""
    thread_ts: str | None = None
    initial_comment: str = ""
    shared: bool = False


@dataclass
class SlackFiles:
    base_url: Callable[[], str]
    team_id: str
    token: str
    uploads: dict[str, Upload] = field(default_factory=dict)
    served: dict[str, bytes] = field(default_factory=dict)  # path -> bytes
    downloads: list[tuple[str, str]] = field(default_factory=list)  # (path, authorization)
    lock: threading.Condition = field(default_factory=threading.Condition)

    # --- the test's side -------------------------------------------------------------------

    def serve(self, name: str, data: bytes) -> dict[str, Any]:
        """A file object as a message event carries it, its ``url_private`` serving ``data``."""
        file_id = "F" + uuid.uuid4().hex[:10].upper()
        path = f"/files-pri/{self.team_id}-{file_id}/{name}"
        self.served[path] = data
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": "application/octet-stream",
            "size": len(data),
            "url_private": self.base_url().removesuffix("/api/") + path,
            "url_private_download": self.base_url().removesuffix("/api/") + path + "?download",
        }

    def shared(self) -> list[Upload]:
        with self.lock:
            return [u for u in self.uploads.values() if u.shared]

    # --- the API ---------------------------------------------------------------------------

    def get_upload_url(self, args: dict[str, Any]) -> dict[str, Any]:
        filename = str(args.get("filename") or "")
        try:
            length = int(args.get("length") or 0)
        except (TypeError, ValueError):
            length = 0
        if not filename or length <= 0:
            return {"ok": False, "error": "invalid_arguments"}
        file_id = "F" + uuid.uuid4().hex[:10].upper()
        with self.lock:
            self.uploads[file_id] = Upload(file_id, filename, length)
        url = self.base_url().removesuffix("/api/") + f"/upload/v1/{file_id}"
        return {"ok": True, "upload_url": url, "file_id": file_id}

    async def receive(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        data = await request.body()
        with self.lock:
            upload = self.uploads.get(file_id)
            if upload is None:
                return PlainTextResponse("Not Found", 404)
            upload.data = data
        return PlainTextResponse(f"OK - {len(data)}")

    def complete(
        self, args: dict[str, Any], channel_exists: Callable[[str], bool]
    ) -> dict[str, Any]:
        try:
            listed = json.loads(str(args.get("files") or "[]"))
        except ValueError:
            return {"ok": False, "error": "invalid_arguments"}
        channel = str(args.get("channel_id") or "")
        if not isinstance(listed, list) or not listed:
            return {"ok": False, "error": "invalid_arguments"}
        if channel and not channel_exists(channel):
            return {"ok": False, "error": "channel_not_found"}
        done = []
        with self.lock:
            for item in listed:
                upload = self.uploads.get(str(item.get("id")) if isinstance(item, dict) else "")
                if upload is None:
                    return {"ok": False, "error": "file_not_found"}
                if upload.data is None or len(upload.data) != upload.length:
                    return {"ok": False, "error": "file_upload_not_completed"}
                done.append((upload, item))
            for upload, item in done:
                upload.title = str(item.get("title") or upload.filename)
                upload.channel = channel
                upload.thread_ts = str(args.get("thread_ts") or "") or None
                upload.initial_comment = str(args.get("initial_comment") or "")
                upload.shared = bool(channel)
            self.lock.notify_all()
        return {
            "ok": True,
            "files": [
                {"id": u.file_id, "name": u.filename, "title": u.title, "size": u.length}
                for u, _ in done
            ],
        }

    async def download(self, request: Request) -> Response:
        path = request.url.path
        given = request.headers.get("authorization", "")
        with self.lock:
            self.downloads.append((path, given))
        if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            return RedirectResponse("https://fake-team.slack.com/?redir=" + path, 302)
        data = self.served.get(path)
        if data is None:
            return PlainTextResponse("Not Found", 404)
        return Response(data, media_type="application/octet-stream")
