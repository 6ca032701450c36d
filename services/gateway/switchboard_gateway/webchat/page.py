"""``GET /webchat``: the WebChat page, its scripts (ES modules) and its style sheet (package data
under ``static/``, no build step, nothing from elsewhere; the Markdown renderer and the libraries
it imports are the shared ones of :mod:`..web.assets`). Public: they hold no data; the page asks
for the gateway token and sends it in the socket's connect request, never in a URL."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

router = APIRouter()
ASSETS = {
    "/webchat": ("index.html", "text/html; charset=utf-8"),
    "/webchat/view.js": ("view.js", "text/javascript; charset=utf-8"),
    "/webchat/webchat.js": ("webchat.js", "text/javascript; charset=utf-8"),
    "/webchat/webchat.css": ("webchat.css", "text/css; charset=utf-8"),
    "/webchat/prefs.js": ("prefs.js", "text/javascript; charset=utf-8"),
    "/webchat/sidebar.js": ("sidebar.js", "text/javascript; charset=utf-8"),
    "/webchat/socket.js": ("socket.js", "text/javascript; charset=utf-8"),
    "/webchat/voice.js": ("voice.js", "text/javascript; charset=utf-8"),
}
PUBLIC_PATHS = frozenset(ASSETS)
# Only this origin's script, style and socket; no framing, no form posts, no referrer.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def asset(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _route(path: str) -> None:
    name, media_type = ASSETS[path]

    async def serve() -> Response:
        return Response(asset(name), media_type=media_type, headers=HEADERS)

    router.add_api_route(path, serve, methods=["GET"], include_in_schema=False)


for _path in ASSETS:
    _route(_path)
