"""A fake Slack for tests: the Web API over real HTTP (a uvicorn thread, like
:mod:`tests.fakes.llm`), reached by our slack_sdk client through its ``base_url``, and signed
Events API calls as Slack makes them::

    with FakeSlack() as slack:
        adapter = SlackAdapter(slack.token, events.secret, slack.base_url)
        slack.fail_next("ratelimited", status=429, retry_after=2)
        ...
        [post] = slack.wait_for_posts(1)

Web API (``POST /api/<method>``, JSON or form-encoded bodies, the token as ``Authorization:
Bearer xoxb-...``, or a ``token`` form field): ``auth.test``, ``chat.postMessage`` (``blocks``
checked and kept), ``chat.update`` and ``chat.postEphemeral`` with the button clicks of
:mod:`tests.fakes.slack_buttons` (``slack.buttons``), and the file uploads and downloads of
:mod:`tests.fakes.slack_files` (``slack.files``). Errors
are Slack's: HTTP 200 with ``{"ok": false, "error": "invalid_auth"}`` (``not_authed``,
``channel_not_found``, ``no_text``, ``msg_too_long``...), HTTP 429 with ``Retry-After`` and
``{"ok": false, "error": "ratelimited"}``; ``fail_next`` scripts those and 5xx. The signed
Events API calls come from :class:`SlackEvents` (tests/fakes/slack_events.py).
"""

from __future__ import annotations

import hmac
import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.server_thread import ServerThread
from tests.fakes.slack_buttons import SlackButtons, blocks_of
from tests.fakes.slack_events import SlackEvents
from tests.fakes.slack_files import SlackFiles, Upload

__all__ = ["ApiCall", "FakeSlack", "Post", "SlackEvents", "SlackFiles", "Upload"]

TEXT_LIMIT = 40_000
METHODS = frozenset(
    {"auth.test", "chat.postMessage", "files.getUploadURLExternal", "files.completeUploadExternal"}
    | {"chat.update", "chat.postEphemeral"}
)


@dataclass(frozen=True)
class Post:
    """A message chat.postMessage accepted."""

    channel: str
    text: str
    thread_ts: str | None
    ts: str
    mrkdwn: Any
    encoding: str  # "json" | "form": how the client sent it
    blocks: list[Any] | None = None


@dataclass(frozen=True)
class ApiCall:
    """Any Web API call and how it was answered (``at``: time.monotonic() on arrival)."""

    method: str
    status: int
    error: str
    at: float


@dataclass(frozen=True)
class _Failure:
    error: str
    status: int
    retry_after: int | None


class FakeSlack:
    """Slack's Web API on 127.0.0.1; ``channels``: the only channel ids that exist (default:
    any)."""

    def __init__(
        self,
        token: str | None = None,
        *,
        bot_user_id: str = "U0BOT",
        bot_id: str = "B0BOT",
        team_id: str = "T0FAKE",
        channels: Iterable[str] | None = None,
    ) -> None:
        self.token = token or f"xoxb-{uuid.uuid4().hex}"
        self.bot_user_id, self.bot_id, self.team_id = bot_user_id, bot_id, team_id
        self.channels = set(channels) if channels is not None else None
        self.port = 0
        self._posts: list[Post] = []
        self._calls: list[ApiCall] = []
        self._failures: list[_Failure] = []
        self._seq = 0
        self._cond = threading.Condition()
        self.files = SlackFiles(lambda: self.base_url, team_id, self.token)
        self.buttons = SlackButtons()  # chat.update, chat.postEphemeral, clicks
        self.app = Starlette(
            routes=[
                Route("/api/{method}", self._api, methods=["POST"]),
                Route("/upload/v1/{file_id}", self.files.receive, methods=["POST"]),
                Route("/files-pri/{path:path}", self.files.download, methods=["GET"]),
            ]
        )
        self._server = ServerThread(self.app, "fake-slack")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    # --- what happened -----------------------------------------------------------------------

    @property
    def posts(self) -> list[Post]:
        with self._cond:
            return list(self._posts)

    @property
    def calls(self) -> list[ApiCall]:
        with self._cond:
            return list(self._calls)

    def reset(self) -> None:
        """Forget the posts, calls and scripted failures so far (a test sharing the fake)."""
        with self._cond:
            self._posts.clear()
            self._calls.clear()
            self._failures.clear()
        self.buttons.reset()

    def posts_in(self, channel: str, thread_ts: str | None = None) -> list[Post]:
        return [p for p in self.posts if p.channel == channel and p.thread_ts == thread_ts]

    def wait_for_posts(self, n: int, timeout: float = 30.0) -> list[Post]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._posts) >= n, timeout):
                raise TimeoutError(f"expected {n} posts, got {len(self._posts)}")
            return list(self._posts)

    def fail_next(
        self, error: str, n: int = 1, *, status: int = 200, retry_after: int | None = None
    ) -> None:
        """Answer the next ``n`` chat.postMessage calls with ``{"ok": false, "error": error}``
        and HTTP ``status``: ``fail_next("ratelimited", status=429, retry_after=2)``,
        ``fail_next("internal_error", status=500)``, ``fail_next("channel_not_found")``."""
        with self._cond:
            self._failures.extend(_Failure(error, status, retry_after) for _ in range(n))

    # --- the API -------------------------------------------------------------------------------

    async def _api(self, request: Request) -> JSONResponse:
        method = request.path_params["method"]
        args, encoding = await _arguments(request)
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        token = token or str(args.get("token") or "")
        if method not in METHODS:
            return self._answer(method, {"ok": False, "error": "unknown_method"}, 404)
        if not token:
            return self._answer(method, {"ok": False, "error": "not_authed"})
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return self._answer(method, {"ok": False, "error": "invalid_auth"})
        if method == "auth.test":
            return self._answer(method, self._auth_test())
        if method == "files.getUploadURLExternal":
            return self._answer(method, self.files.get_upload_url(args))
        if method == "files.completeUploadExternal":
            exists = lambda c: self.channels is None or c in self.channels  # noqa: E731
            return self._answer(method, self.files.complete(args, exists))
        if method == "chat.update":
            return self._answer(method, self.buttons.update(args, self.posts))
        if method == "chat.postEphemeral":
            return self._answer(method, self.buttons.ephemeral(args))
        with self._cond:
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after else {}
            body = {"ok": False, "error": failure.error}
            return self._answer(method, body, failure.status, headers)
        with self._cond:  # the call is on record when its post is seen
            return self._answer(method, self._post(args, encoding))

    def _answer(
        self,
        method: str,
        body: dict[str, Any],
        status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> JSONResponse:
        with self._cond:
            error = str(body.get("error", ""))
            self._calls.append(ApiCall(method, status, error, time.monotonic()))
            self._cond.notify_all()
        return JSONResponse(body, status, headers)

    def _auth_test(self) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://fake-team.slack.com/",
            "team": "Fake Team",
            "user": "switchboard",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _post(self, args: dict[str, Any], encoding: str) -> dict[str, Any]:
        channel = args.get("channel")
        text = args.get("text")
        thread_ts = args.get("thread_ts") or None
        if not isinstance(channel, str) or not channel:
            return {"ok": False, "error": "channel_not_found"}
        if self.channels is not None and channel not in self.channels:
            return {"ok": False, "error": "channel_not_found"}
        if not isinstance(text, str) or not text:
            return {"ok": False, "error": "no_text"}
        if len(text) > TEXT_LIMIT:
            return {"ok": False, "error": "msg_too_long"}
        try:
            blocks = blocks_of(args)
        except ValueError:
            return {"ok": False, "error": "invalid_blocks"}
        with self._cond:
            self._seq += 1
            ts = f"{int(time.time())}.{self._seq:06d}"
            post = Post(channel, text, thread_ts, ts, args.get("mrkdwn"), encoding, blocks)
            self._posts.append(post)
            self._cond.notify_all()
        message = {
            "user": self.bot_user_id,
            "type": "message",
            "ts": ts,
            "bot_id": self.bot_id,
            "app_id": "A0FAKE",
            "text": text,
            "team": self.team_id,
        }
        if thread_ts:
            message["thread_ts"] = thread_ts
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeSlack:
        self.port = self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _arguments(request: Request) -> tuple[dict[str, Any], str]:
    """The call's arguments as Slack reads them: a JSON object or a form."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("application/json"):
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            body = {}
        return (body if isinstance(body, dict) else {}), "json"
    # application/x-www-form-urlencoded (and what has no type), as Slack reads it
    form = urllib.parse.parse_qsl((await request.body()).decode("utf-8", "replace"))
    return dict(form), "form"
