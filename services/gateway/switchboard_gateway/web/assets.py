"""``GET /web/vendor/<file>``: the vendored browser libraries (:mod:`.vendor_lock`), public like
the pages that import them (they hold no data), immutable for as long as their name is locked;
``GET /web/<file>``: this package's own modules the pages share (``static/``: the Markdown
renderer and its style sheet), public too but revalidated, since they change with the gateway."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

from .vendor_lock import WANTED

router = APIRouter()
PREFIX = "/web/vendor/"
OWN_PREFIX = "/web/"
OWN = ("markdown.js", "markdown.css")  # static/<name>, served at /web/<name>
TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css"}


def _media_type(name: str) -> str:
    return next((t for suffix, t in TYPES.items() if name.endswith(suffix)), "")


# Scripts and style sheets only (the licences stay package data, not routes).
SERVED = {w.name: _media_type(w.name) for w in WANTED if w.served and _media_type(w.name)}
PUBLIC_PATHS = frozenset(
    [*(PREFIX + name for name in SERVED), *(OWN_PREFIX + name for name in OWN)]
)
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "public, max-age=86400",
    "Cross-Origin-Resource-Policy": "same-origin",
}
OWN_HEADERS = {**HEADERS, "Cache-Control": "no-cache"}


@cache
def _read(folder: str, name: str) -> bytes:
    return resources.files(__package__).joinpath(folder, name).read_bytes()


def _route(path: str, folder: str, name: str, headers: dict[str, str]) -> None:
    media_type = f"{_media_type(name)}; charset=utf-8"

    async def serve() -> Response:
        return Response(_read(folder, name), media_type=media_type, headers=headers)

    router.add_api_route(path, serve, methods=["GET"], include_in_schema=False)


for _name in SERVED:
    _route(PREFIX + _name, "vendor", _name, HEADERS)
for _name in OWN:
    _route(OWN_PREFIX + _name, "static", _name, OWN_HEADERS)
