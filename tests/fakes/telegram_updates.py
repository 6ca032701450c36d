"""A fake Telegram Bot API for polling mode, over real HTTP (a uvicorn thread, like
tests/fakes/llm.py): ``getUpdates`` with Telegram's long-poll semantics, the webhook methods
that decide whether polling is allowed, and ``getMe``::

    with FakeTelegramUpdates() as tg:
        tg.push_message("hello")               # an update waiting to be fetched
        tg.set_webhook("https://example/hook") # getUpdates now answers 409
        tg.hang = True                         # getUpdates calls never answer (a black hole)
        base = tg.base_url                     # the API root: f"{base}/bot{tg.token}/getUpdates"

What Telegram does and this fake does too:

- ``getUpdates(offset, limit, timeout, allowed_updates)`` answers at once with the updates whose
  ``update_id >= offset``; when there are none it waits up to ``timeout`` seconds for one.
  Calling it with ``offset`` confirms (forgets) every update below ``offset``; without one it
  starts at the earliest unconfirmed update; a negative offset ``-n`` gives the last ``n``.
- While a webhook is set it answers ``409`` "can't use getUpdates method while webhook is
  active"; ``deleteWebhook`` removes it.
- A second getUpdates while one is waiting ends the waiting one with ``409`` "terminated by
  other getUpdates request" (counted in :attr:`conflicts`: two pollers on one bot).
- Errors are ``{"ok": false, "error_code", "description"[, "parameters": {"retry_after"}]}``
  with the same HTTP status; a wrong token is ``401 Unauthorized``.

Parameters come as a query string, a form or JSON, as the Bot API takes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.server_thread import ServerThread
from tests.fakes.telegram_wire import Refused, error_response, ok, params_of

WEBHOOK_ACTIVE = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to "
    "delete the webhook first"
)
TERMINATED = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)


@dataclass
class _Poll:
    """A getUpdates call waiting for updates."""

    terminated: asyncio.Event = field(default_factory=asyncio.Event)


class FakeTelegramUpdates:
    def __init__(self, token: str = "123456:fake-polling-token", bot_id: int = 123456) -> None:
        self.token = token
        self.bot_id = bot_id
        self.webhook_url = ""
        self.hang = False  # getUpdates calls are swallowed until the caller gives up
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (method, params) as received
        self._times: list[tuple[str, float]] = []  # (method, monotonic time) of each call
        self._failed: list[tuple[str, float]] = []  # (method, time) of each call failed on purpose
        self.conflicts = 0  # getUpdates calls ended by a newer one (two pollers)
        self.hung = 0  # getUpdates calls swallowed while ``hang`` was set
        self.answered = 0  # getUpdates calls answered with ok
        self._updates: list[dict[str, Any]] = []  # not yet confirmed
        self._ids = itertools.count(700_000_001)
        self._message_ids = itertools.count(1)
        self._failures: list[tuple[str, int, str, int | None]] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._arrived: asyncio.Event | None = None
        self._waiting: _Poll | None = None
        self.port = 0
        self.app = Starlette(
            routes=[Route("/bot{token}/{method}", self._api, methods=["GET", "POST"])]
        )
        # force_exit: long polls and black holes do not end by themselves
        self._server = ServerThread(
            self.app,
            "fake-telegram-updates",
            on_loop=self._on_loop,
            force_exit=True,
            graceful_s=1.0,
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- the test's side -------------------------------------------------------------------

    def push_message(self, text: str, user_id: int = 4242, chat_id: int | None = None) -> int:
        """A user's text message as a ``message`` update; its ``update_id``."""
        user = {"id": user_id, "is_bot": False, "first_name": "Ada", "username": "ada"}
        chat: dict[str, Any] = {"id": user_id, "first_name": "Ada", "type": "private"}
        if chat_id is not None and chat_id != user_id:
            chat = {"id": chat_id, "title": "Team", "type": "supergroup"}
        message = {
            "message_id": next(self._message_ids),
            "from": user,
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        return self.push({"message": message})

    def push(self, update: dict[str, Any]) -> int:
        """Queue an update (``update_id`` is added); wakes a waiting getUpdates."""
        with self._lock:
            update_id = next(self._ids)
            self._updates.append({"update_id": update_id, **update})
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake)
        return update_id

    def pending(self) -> list[int]:
        """The ``update_id`` of every update not yet confirmed."""
        with self._lock:
            return [u["update_id"] for u in self._updates]

    def set_webhook(self, url: str) -> None:
        self.webhook_url = url

    def fail_next(
        self, method: str, code: int, description: str, retry_after: int | None = None
    ) -> None:
        """The next call of ``method`` fails with this error (429 with ``retry_after``...)."""
        self._failures.append((method, code, description, retry_after))

    def methods_called(self) -> list[str]:
        return [method for method, _ in self.calls]

    def call_times(self, method: str) -> list[float]:
        """When each call of ``method`` arrived (``time.monotonic()``)."""
        return [t for m, t in self._times if m == method]

    def failed_at(self, method: str) -> list[float]:
        """When each call of ``method`` that :meth:`fail_next` failed arrived."""
        return [t for m, t in self._failed if m == method]

    @property
    def polling(self) -> bool:
        """A getUpdates call is waiting for updates."""
        return self._waiting is not None

    # --- the API ---------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._arrived is not None:
            self._arrived.set()
        self._arrived = asyncio.Event()

    async def _api(self, request: Request) -> JSONResponse:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.path_params["method"]
        try:
            params = await params_of(request)
        except ValueError:
            return _error(400, "Bad Request: can't parse parameters")
        self.calls.append((method, params))
        arrived = time.monotonic()
        self._times.append((method, arrived))
        for failure in self._failures:
            if failure[0] == method:
                self._failures.remove(failure)
                self._failed.append((method, arrived))
                return _error(failure[1], failure[2], failure[3])
        if method == "getMe":
            bot = {"id": self.bot_id, "is_bot": True, "first_name": "Fake", "username": "fake_bot"}
            return ok({**bot, "can_join_groups": True, "supports_inline_queries": False})
        if method == "setWebhook":
            self.webhook_url = str(params.get("url", ""))
            return ok(True, "Webhook was set")
        if method == "deleteWebhook":
            was_set, self.webhook_url = bool(self.webhook_url), ""
            if _truthy(params.get("drop_pending_updates")):
                with self._lock:
                    self._updates.clear()
            return ok(True, "Webhook was deleted" if was_set else "Webhook is already deleted")
        if method == "getWebhookInfo":
            return ok({"url": self.webhook_url, "pending_update_count": len(self.pending())})
        if method == "getUpdates":
            return await self._get_updates(request, params)
        return _error(404, "Not Found")

    async def _get_updates(self, request: Request, params: dict[str, Any]) -> JSONResponse:
        if self.webhook_url:
            return _error(409, WEBHOOK_ACTIVE)
        try:
            offset = int(params.get("offset", 0))
            limit = min(max(int(params.get("limit", 100)), 1), 100)
            timeout = max(float(params.get("timeout", 0)), 0.0)
        except (TypeError, ValueError):
            return _error(400, "Bad Request: wrong parameter value")
        allowed = params.get("allowed_updates")
        if isinstance(allowed, str):
            allowed = json.loads(allowed or "[]")
        if self.hang:
            self.hung += 1
            await _disconnected(request)  # a black hole: only the caller ends it
            return _error(504, "Gateway Timeout")
        if self._waiting is not None:
            self._waiting.terminated.set()
            self.conflicts += 1
        poll = self._waiting = _Poll()
        deadline = time.monotonic() + timeout
        try:
            while True:
                found = self._take(offset, limit, allowed or None)
                remaining = deadline - time.monotonic()
                if found or remaining <= 0:
                    self.answered += 1
                    return ok(found)
                if self._arrived is None:
                    self._arrived = asyncio.Event()
                outcome = await _first(
                    self._arrived.wait(), poll.terminated.wait(), _disconnected(request), remaining
                )
                if outcome == 1:
                    return _error(409, TERMINATED)
                if outcome == 2:
                    return _error(499, "client went away")  # nobody reads it
        finally:
            if self._waiting is poll:
                self._waiting = None

    def _take(self, offset: int, limit: int, allowed: list[str] | None) -> list[dict[str, Any]]:
        with self._lock:
            if offset > 0:  # confirms every update below it
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
                found = self._updates
            elif offset < 0:
                found = self._updates[offset:]
            else:
                found = self._updates
            if allowed is not None:
                found = [u for u in found if any(kind in u for kind in allowed)]
            return [dict(u) for u in found[:limit]]

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeTelegramUpdates:
        self.port = self._server.start()
        return self

    async def _on_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._arrived = asyncio.Event()

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> FakeTelegramUpdates:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _error(code: int, description: str, retry_after: int | None = None) -> JSONResponse:
    parameters = {"retry_after": retry_after} if retry_after is not None else None
    return error_response(Refused(code, description, parameters))


def _truthy(value: object) -> bool:
    return value is True or str(value).lower() in ("true", "1")


async def _disconnected(request: Request) -> None:
    """Returns when the caller closes the connection."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _first(arrived: Any, terminated: Any, disconnected: Any, timeout: float) -> int | None:
    """Which of the three awaitables finished first (0, 1, 2), None after ``timeout``."""
    tasks = [asyncio.ensure_future(a) for a in (arrived, terminated, disconnected)]
    try:
        done, _ = await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    return next((i for i, t in enumerate(tasks) if t in done), None)
