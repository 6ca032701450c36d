"""The Control UI's login (docs/web-ui.md): the gateway token once, for a signed cookie.

``POST /ui/login`` with ``{"token": "<gateway token>"}`` sets the cookie ``sb_ui`` =
``<expiry>.<nonce>.<mac>``: stateless (nothing stored), its MAC an HMAC-SHA256 under a key
derived from the gateway token, so every replica accepts it and a new token ends every UI
session. The answer's CSRF token is HMAC(key, "csrf:" + nonce). :func:`cookie_auth` (called by
:class:`..auth.TokenAuth` when a request has no bearer header) accepts a request carrying a valid
unexpired cookie and that nonce's CSRF token in ``X-CSRF-Token``.

A wrong token answers 401 after a delay, the failures of a gateway process one after another
(:class:`FailedLogins`): at most one wrong guess a second per replica."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.requests import cookie_parser
from starlette.types import Scope

from ..errors import error_body

log = logging.getLogger(__name__)
router = APIRouter()

COOKIE = "sb_ui"
CSRF_HEADER = "X-CSRF-Token"
LIFETIME_S = 12 * 3600
FAILURE_DELAY_S = 1.0
KEY_LABEL = b"switchboard control ui session v1"
PATHS = frozenset({"/ui/login", "/ui/session", "/ui/logout"})  # public: each checks itself
NO_STORE = {"Cache-Control": "no-store"}


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


NO_COOKIE = Refusal(401, "No UI session cookie.")
BAD_COOKIE = Refusal(401, "The UI session is invalid or has expired: log in again.")
BAD_CSRF = Refusal(403, "Missing or wrong X-CSRF-Token header for this UI session.")


def _key(gateway_token: str) -> bytes:
    return hmac.new(gateway_token.encode(), KEY_LABEL, hashlib.sha256).digest()


def _mac(key: bytes, message: str) -> str:
    digest = hmac.new(key, message.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def csrf_token(gateway_token: str, nonce: str) -> str:
    return _mac(_key(gateway_token), "csrf:" + nonce)


def issue(gateway_token: str, now: float | None = None) -> tuple[str, str]:
    """A new cookie value and its CSRF token."""
    expiry = int(now if now is not None else time.time()) + LIFETIME_S
    nonce = secrets.token_urlsafe(16)
    signed = f"{expiry}.{nonce}"
    return f"{signed}.{_mac(_key(gateway_token), signed)}", csrf_token(gateway_token, nonce)


def cookie_nonce(value: str, gateway_token: str, now: float | None = None) -> str | None:
    """The nonce of a cookie value signed under this gateway token and not expired; else None."""
    expiry, _, rest = value.partition(".")
    nonce, _, mac = rest.partition(".")
    if not (expiry.isdigit() and nonce and mac):
        return None
    if not hmac.compare_digest(
        mac.encode(), _mac(_key(gateway_token), f"{expiry}.{nonce}").encode()
    ):
        return None
    if int(expiry) <= (now if now is not None else time.time()):
        return None
    return nonce


def _headers(scope: Scope, name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope["headers"] if k == name]


def _cookie(scope: Scope) -> str | None:
    cookies: dict[str, str] = {}
    for header in _headers(scope, b"cookie"):
        cookies.update(cookie_parser(header))
    return cookies.get(COOKIE)


def cookie_auth(scope: Scope, gateway_token: str) -> Refusal | None:
    """None when the request carries a valid UI cookie and its nonce's CSRF token; else why
    not (:data:`NO_COOKIE` when it has no UI cookie at all)."""
    value = _cookie(scope)
    if value is None:
        return NO_COOKIE
    nonce = cookie_nonce(value, gateway_token)
    if nonce is None:
        return BAD_COOKIE
    sent = next(iter(_headers(scope, CSRF_HEADER.lower().encode())), "")
    if not hmac.compare_digest(sent.encode(), csrf_token(gateway_token, nonce).encode()):
        return BAD_CSRF
    return None


class FailedLogins:
    """Wrong tokens are answered one after another, each after :data:`FAILURE_DELAY_S`."""

    def __init__(self, delay_s: float = FAILURE_DELAY_S) -> None:
        self.delay_s = delay_s
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self.lock:
            await asyncio.sleep(self.delay_s)


class LoginBody(BaseModel):
    token: str = Field(min_length=1, max_length=4096)


def _refused(refusal: Refusal, clear: bool = False) -> JSONResponse:
    response = JSONResponse(
        error_body(refusal.status, refusal.message), status_code=refusal.status, headers=NO_STORE
    )
    if clear:
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _secure(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return forwarded == "https" or request.url.scheme == "https"


@router.post("/ui/login", include_in_schema=False)
async def login(body: LoginBody, request: Request) -> JSONResponse:
    gateway_token: str = request.app.state.settings.gateway_token.get_secret_value()
    if not gateway_token or not hmac.compare_digest(body.token.encode(), gateway_token.encode()):
        failures: FailedLogins | None = getattr(request.app.state, "ui_failed_logins", None)
        if failures is None:
            failures = request.app.state.ui_failed_logins = FailedLogins()
        await failures.wait()
        log.warning("Control UI login refused: wrong gateway token")
        return _refused(Refusal(401, "Wrong gateway token."))
    value, csrf = issue(gateway_token)
    response = JSONResponse({"csrf": csrf}, headers=NO_STORE)
    response.set_cookie(
        COOKIE,
        value,
        max_age=LIFETIME_S,
        path="/",
        secure=_secure(request),
        httponly=True,
        samesite="strict",
    )
    return response


@router.get("/ui/session", include_in_schema=False)
async def session(request: Request) -> JSONResponse:
    """The CSRF token of the request's UI cookie (a reloaded page asks again)."""
    gateway_token: str = request.app.state.settings.gateway_token.get_secret_value()
    value = _cookie(request.scope)
    nonce = cookie_nonce(value, gateway_token) if value is not None else None
    if nonce is None:
        return _refused(BAD_COOKIE if value is not None else NO_COOKIE, clear=value is not None)
    answer: dict[str, Any] = {"csrf": csrf_token(gateway_token, nonce)}
    return JSONResponse(answer, headers=NO_STORE)


@router.post("/ui/logout", include_in_schema=False)
async def logout() -> JSONResponse:
    response = JSONResponse({"logged_out": True}, headers=NO_STORE)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
