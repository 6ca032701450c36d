"""A fake Discord for tests: the REST API over real HTTP (a uvicorn thread, like
:mod:`tests.fakes.llm`), reached by our httpx client through its base URL, and signed
interactions as Discord sends them (:class:`DiscordInteractions`)::

    with FakeDiscord() as discord:
        adapter = DiscordAdapter(discord.token, discord.interactions.public_key, discord.base_url)
        payload = discord.interactions.slash_command("hi", guild_id="...")
        discord.fail_next(429, retry_after=0.5)
        ...
        [edit] = discord.wait_for(lambda d: d.interaction(payload["token"]).original)

Endpoints (under ``/api/v10``): ``POST /channels/{id}/messages``, ``POST /channels/{id}/typing`` and
``GET /users/@me`` (``Authorization: Bot <token>``, else 401 ``{"message": "401: Unauthorized",
"code": 0}``), ``PATCH /webhooks/{app}/{token}/messages/@original`` and ``POST
/webhooks/{app}/{token}`` (the interaction token is the credential), each as JSON or as
``multipart/form-data`` with ``payload_json`` and files ``files[n]`` (kept on the message's
``attachments``; ``attachments[].id`` must name a sent file; over 10 MB is 413, 40005). Answers
are Discord's:
message objects; 400 ``Invalid Form Body`` (50035) past 2000 characters, ``Cannot send an
empty message`` (50006); 404 ``Unknown Channel`` (10003), ``Unknown Webhook`` (10015),
``Unknown Message`` (10008: editing a response never given); 401 ``Invalid Webhook Token``
(50027) for an expired interaction; 429 with ``retry_after``/``global`` and ``Retry-After``;
``fail_next`` scripts those and 5xx. ``enforce_nonce`` is honoured as Discord does.

Components: a message's ``components`` (action rows of buttons) and ``flags`` are kept; a
click on a button is a MESSAGE_COMPONENT interaction (:meth:`DiscordInteractions.click`) whose
deferred update (type 6) makes the clicked message the interaction's ``@original``, which its
webhook then edits (``components`` replaced when given, kept otherwise).
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from tests.fakes.discord_interactions import DiscordInteractions, snowflake
from tests.fakes.discord_rest import (
    ERRORS,
    MAX_FILE_BYTES,
    ApiCall,
    Attachment,
    Interaction,
    Message,
    message_json,
    message_object,
    rate_limited,
)
from tests.fakes.discord_ws import FakeGateway
from tests.fakes.server_thread import ServerThread

__all__ = [
    "ApiCall",
    "Attachment",
    "DiscordInteractions",
    "FakeDiscord",
    "Interaction",
    "Message",
]

T = TypeVar("T")


@dataclass(frozen=True)
class _Failure:
    status: int
    retry_after: float
    global_: bool
    route: str | None


class FakeDiscord:
    """Discord's REST API on 127.0.0.1; ``channels``: the only channel ids that exist (default:
    any)."""

    def __init__(self, token: str | None = None, *, channels: Iterable[str] | None = None):
        self.token = token or f"MTA{uuid.uuid4().hex}.Gq{uuid.uuid4().hex[:6]}.{uuid.uuid4().hex}"
        self.bot_id = snowflake()
        self.channels = set(channels) if channels is not None else None
        self.interactions = DiscordInteractions(on_token=self.open_interaction)
        self.gateway = FakeGateway(self.token, self.bot_id, lambda: self.gateway_url)
        self.port = 0
        self._messages: list[Message] = []
        self._interactions: dict[str, Interaction] = {}
        self._pending: set[str] = set()  # interactions whose endpoint has not answered yet
        self._calls: list[ApiCall] = []
        self._failures: list[_Failure] = []
        self._cond = threading.Condition()
        hook = "/api/v10/webhooks/{app}/{token}"
        self.app = Starlette(
            routes=[
                Route("/api/v10/channels/{channel}/messages", self._create, methods=["POST"]),
                Route("/api/v10/channels/{channel}/typing", self._typing, methods=["POST"]),
                Route(hook + "/messages/@original", self._edit_original, methods=["PATCH"]),
                Route(hook, self._followup, methods=["POST"]),
                Route("/api/v10/gateway/bot", self._gateway_bot, methods=["GET"]),
                Route("/api/v10/users/@me", self._me, methods=["GET"]),
                WebSocketRoute("/gateway/", self.gateway.endpoint),
            ]
        )
        self._server = ServerThread(self.app, "fake-discord")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # --- the platform's side -------------------------------------------------------------------

    def open_interaction(self, token: str, application_id: str, channel_id: str) -> None:
        with self._cond:
            self._interactions[token] = Interaction(token, application_id, channel_id)

    def send_interaction(self, url: str, payload: dict[str, Any]) -> httpx.Response:
        """Call the interactions endpoint at ``url`` as Discord does (signed) and take its
        answer; until then the interaction's webhooks wait, as Discord only knows of the
        response once it has the endpoint's answer."""
        token = payload["token"]
        with self._cond:
            self._pending.add(token)
        try:
            body, headers = self.interactions.request(payload)
            response = httpx.post(url, content=body, headers=headers, timeout=30)
            if response.status_code == 200:
                clicked = payload.get("message") if payload.get("type") == 3 else None
                on = str(clicked["id"]) if isinstance(clicked, dict) else None
                self.record_response(token, response.json(), on)
            return response
        finally:
            with self._cond:
                self._pending.discard(token)
                self._cond.notify_all()

    def record_response(
        self, token: str, response: dict[str, Any], message_id: str | None = None
    ) -> None:
        """What our endpoint answered the interaction: a deferred one (type 5) creates the
        original response ("thinking..."), which may then be edited; a component's deferred
        update (type 6) makes ``message_id`` (the clicked message) the original. Only the first
        answer counts (Discord: "Interaction has already been acknowledged")."""
        with self._cond:
            interaction = self._interactions[token]
            if interaction.response is not None:
                return
            interaction.response = response
            if response.get("type") == 6 and message_id is not None:
                latest = [m for m in self._messages if m.id == message_id]
                interaction.original = latest[-1] if latest else None
            if response.get("type") in (4, 5):
                content = str((response.get("data") or {}).get("content") or "")
                interaction.original = self._new(
                    interaction.channel_id, content, "original", app=interaction.application_id
                )
            self._cond.notify_all()

    def expire(self, token: str) -> None:
        """The interaction's 15 minutes are over: its webhooks answer 401."""
        with self._cond:
            self._interactions[token].expired = True

    def fail_next(
        self,
        status: int,
        n: int = 1,
        *,
        retry_after: float = 1.0,
        global_: bool = False,
        route: str | None = None,
    ) -> None:
        """Answer the next ``n`` message calls (of ``route``: "channel", "original",
        "followup"; or any) with ``status`` in Discord's error shape."""
        with self._cond:
            self._failures.extend(_Failure(status, retry_after, global_, route) for _ in range(n))

    # --- what happened ---------------------------------------------------------------------

    @property
    def calls(self) -> list[ApiCall]:
        with self._cond:
            return list(self._calls)

    def messages_in(self, channel_id: str) -> list[Message]:
        """The channel's messages as they are now (original responses with their edits)."""
        with self._cond:
            latest = {m.id: m for m in self._messages}
            return [
                latest[i]
                for i in dict.fromkeys(m.id for m in self._messages)
                if latest[i].channel_id == channel_id
            ]

    def interaction(self, token: str) -> Interaction:
        with self._cond:
            found = self._interactions[token]
            return replace(found, followups=list(found.followups))

    def wait_for(self, check: Callable[[FakeDiscord], T | None], timeout: float = 30.0) -> T:
        """Until ``check(self)`` is truthy (re-checked on every call the fake answers)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = check(self)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the fake Discord never saw what was awaited")
                self._cond.wait(min(left, 0.5))

    # --- the API -------------------------------------------------------------------------------

    async def _create(self, request: Request) -> Response:
        channel = request.path_params["channel"]
        denied = self._authorize(request, "channel")
        if denied is not None:
            return denied
        if self.channels is not None and channel not in self.channels:
            return self._error(request, "channel", 404, "bot")
        body, failed = await self._body(request, "channel")
        if failed is not None:
            return failed
        nonce = body.get("nonce")
        with self._cond:
            if body.get("enforce_nonce") and nonce is not None:
                for seen in self._messages:
                    if seen.channel_id == channel and seen.nonce == nonce:
                        return self._answer(
                            request, "channel", 200, message_object(seen, self.bot_id)
                        )
            message = self._new(channel, body.get("content", ""), "bot", body)
            # Under the lock: the call is on record when its message is seen.
            return self._answer(request, "channel", 200, message_object(message, self.bot_id))

    async def _gateway_bot(self, request: Request) -> Response:
        denied = self._authorize(request, "gateway")
        if denied is not None:
            return denied
        limit = {"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}
        body = {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}
        return self._answer(request, "gateway", 200, body)

    async def _me(self, request: Request) -> Response:
        """The bot's user object (the identity call a token is checked with)."""
        user = {"id": self.bot_id, "username": "switchboard", "discriminator": "0", "bot": True}
        return self._authorize(request, "me") or self._answer(request, "me", 200, user)

    async def _typing(self, request: Request) -> Response:
        denied = self._authorize(request, "typing")
        if denied is not None:
            return denied
        self._record(request, "typing", 204)
        return Response(status_code=204)

    async def _edit_original(self, request: Request) -> Response:
        interaction = await self._hook(request, "original")
        if isinstance(interaction, Response):
            return interaction
        if interaction.original is None:
            error = {"message": "Unknown Message", "code": 10008}
            return self._answer(request, "original", 404, error)
        body, failed = await self._body(request, "original")
        if failed is not None:
            return failed
        with self._cond:
            edited = replace(
                interaction.original,
                content=body.get("content", ""),
                allowed_mentions=body.get("allowed_mentions"),
                attachments=_attachments(body),
                edits=interaction.original.edits + 1,
                components=body.get("components", interaction.original.components),
            )
            interaction.original = edited
            self._messages.append(edited)
            return self._answer(request, "original", 200, message_object(edited, self.bot_id))

    async def _followup(self, request: Request) -> Response:
        interaction = await self._hook(request, "followup")
        if isinstance(interaction, Response):
            return interaction
        body, failed = await self._body(request, "followup")
        if failed is not None:
            return failed
        with self._cond:
            message = self._new(
                interaction.channel_id,
                body.get("content", ""),
                "followup",
                body,
                interaction.application_id,
            )
            interaction.followups.append(message)
            return self._answer(request, "followup", 200, message_object(message, self.bot_id))

    # --- helpers -------------------------------------------------------------------------------

    def _authorize(self, request: Request, route: str) -> Response | None:
        given = request.headers.get("authorization", "")
        if hmac.compare_digest(given.encode(), f"Bot {self.token}".encode()):
            return None
        return self._error(request, route, 401, "bot")

    async def _hook(self, request: Request, route: str) -> Interaction | Response:
        """The interaction whose webhook is called, or Discord's refusal."""
        await asyncio.to_thread(self._answered, request.path_params["token"])
        with self._cond:
            found = self._interactions.get(request.path_params["token"])
        if found is None or found.application_id != request.path_params["app"]:
            return self._error(request, route, 404, "hook")
        if found.expired:
            return self._error(request, route, 401, "hook")
        return found

    async def _body(self, request: Request, route: str) -> tuple[dict[str, Any], Response | None]:
        with self._cond:
            failure = next((f for f in self._failures if f.route in (None, route)), None)
            if failure is not None:
                self._failures.remove(failure)
        if failure is not None:
            return {}, self._scripted(request, route, failure)
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            body, error = await _multipart(request)
        else:
            body, error = message_json(await request.body())
        if error is not None:
            return {}, self._answer(request, route, 400, error)
        return body, None

    def _answered(self, token: str) -> None:
        """Until the endpoint has answered the interaction (see send_interaction)."""
        with self._cond:
            self._cond.wait_for(lambda: token not in self._pending, timeout=30)

    def _scripted(self, request: Request, route: str, failure: _Failure) -> Response:
        if failure.status == 429:
            body, headers = rate_limited(failure.retry_after, failure.global_)
            return self._answer(request, route, 429, body, headers)
        kind = "bot" if route == "channel" else "hook"
        return self._error(request, route, failure.status, kind)

    def _error(self, request: Request, route: str, status: int, kind: str) -> Response:
        message, code = ERRORS.get((status, kind), (f"{status}: Internal Server Error", 0))
        return self._answer(request, route, status, {"message": message, "code": code})

    def _new(
        self,
        channel: str,
        content: str,
        via: str,
        body: dict[str, Any] | None = None,
        app: str = "",
    ) -> Message:
        body = body or {}
        message = Message(
            snowflake(),
            channel,
            content,
            via,
            body.get("allowed_mentions"),
            body.get("message_reference"),
            body.get("nonce"),
            application_id=app,
            attachments=_attachments(body),
            components=body.get("components"),
            flags=int(body.get("flags") or 0),
        )
        self._messages.append(message)
        return message

    def _answer(
        self,
        request: Request,
        route: str,
        status: int,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> JSONResponse:
        self._record(request, route, status)
        return JSONResponse(body, status, headers)

    def _record(self, request: Request, route: str, status: int) -> None:
        with self._cond:
            auth = request.headers.get("authorization", "")
            self._calls.append(ApiCall(request.method, route, status, auth, time.monotonic()))
            self._cond.notify_all()

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeDiscord:
        self.port = self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> FakeDiscord:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _multipart(request: Request) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A message sent with files: ``payload_json`` and ``files[n]`` (Discord's upload form)."""
    form = await request.form()
    files: dict[int, Attachment] = {}
    payload = "{}"
    for key, value in form.multi_items():
        if key == "payload_json" and isinstance(value, str):
            payload = value
        elif key.startswith("files[") and key.endswith("]") and not isinstance(value, str):
            data = await value.read()
            if len(data) > MAX_FILE_BYTES:
                return {}, {"message": "Request entity too large", "code": 40005}
            n = int(key[6:-1])
            files[n] = Attachment(snowflake(), value.filename or "", value.content_type or "", data)
    return message_json(payload, files)


def _attachments(body: dict[str, Any]) -> tuple[Attachment, ...]:
    return tuple(body.get("files") or ())
