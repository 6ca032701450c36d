"""Bearer-token authentication of every endpoint but the public ones, checked before anything
else of a request is read (its body included)."""

from __future__ import annotations

import hashlib
import hmac

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .a2a_mount import CARD_PATH
from .errors import error_body
from .ui import PUBLIC_PATHS as UI_PATHS
from .ui import login as ui_login
from .web.assets import PUBLIC_PATHS as WEB_ASSETS

# /metrics is not public: its series name routes, channels and volumes. /openapi.json is served
# behind the token; the docs pages (/docs, /redoc) are not served at all.
PUBLIC = frozenset(
    {
        "/",
        "/healthz",
        "/readyz",
        # --- webchat: the page and its assets hold no data; WS /webchat/ws authenticates
        # itself (its connect request), and this middleware sees HTTP only. ---
        "/webchat",
        "/webchat/view.js",
        "/webchat/webchat.js",
        "/webchat/webchat.css",
        *("/webchat/prefs.js", "/webchat/sidebar.js", "/webchat/socket.js", "/webchat/voice.js"),
        # --- a2a: the agent card (it names the bearer scheme; POST /a2a needs the token) ---
        CARD_PATH,
    }
    | WEB_ASSETS  # the pages' vendored libraries (web/vendor_lock.py): no data
    | UI_PATHS  # the Control UI's pages (no data) and its login routes (each checks itself)
)
# Channel webhooks are authenticated by the platform's own signature or secret.
PLATFORM_AUTHENTICATED = "/channels/"
# hooks: POST /hooks/* carry SB_HOOKS_TOKEN or a mapping's own token, checked by hooks_api.py.
HOOKS_AUTHENTICATED = "/hooks/"


def is_public(path: str) -> bool:
    return path in PUBLIC or path.startswith((PLATFORM_AUTHENTICATED, HOOKS_AUTHENTICATED))


def token_problem(header: str, expected: str) -> str | None:
    """Why ``Authorization: <header>`` does not carry the gateway token; None when it does."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return "Missing bearer token: send 'Authorization: Bearer <gateway token>'."
    if not hmac.compare_digest(token.strip().encode(), expected.encode()):
        return "Invalid bearer token."
    return None


def caller_id(authorization: str) -> str:
    """Who an authenticated request is (per-token limits): a digest of its bearer token, so
    that the token itself is not kept."""
    token = authorization.partition(" ")[2].strip()
    return hashlib.sha256(token.encode()).hexdigest()[:16]


class TokenAuth:
    """ASGI middleware: 401 in OpenAI's error shape unless the request carries the token, or
    (no Authorization header) the Control UI's cookie and its CSRF token (ui/login.py)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not is_public(scope["path"]):
            header = next(
                (v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), ""
            )
            problem, status = token_problem(header, self.token), 401
            if problem is not None and not header:
                refusal = ui_login.cookie_auth(scope, self.token)
                if refusal is None:
                    problem = None
                elif refusal is not ui_login.NO_COOKIE:
                    problem, status = refusal.message, refusal.status
            if problem is not None:
                code = "invalid_api_key" if problem.startswith("Invalid") else None
                response = JSONResponse(
                    error_body(status, problem, code),
                    status_code=status,
                    headers={"WWW-Authenticate": "Bearer"} if status == 401 else None,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
