"""``GET /web/vendor/<file>``: the vendored browser libraries (:mod:`.vendor_lock`), public like
the pages that import them (they hold no data), immutable for as long as their name is locked."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

from .vendor_lock import WANTED

router = APIRouter()
PREFIX = "/web/vendor/"
TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css"}


def _media_type(name: str) -> str:
    return next((t for suffix, t in TYPES.items() if name.endswith(suffix)), "")


# Scripts and style sheets only (the licences stay package data, not routes).
SERVED = {w.name: _media_type(w.name) for w in WANTED if w.served and _media_type(w.name)}
PUBLIC_PATHS = frozenset(PREFIX + name for name in SERVED)
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "public, max-age=86400",
    "Cross-Origin-Resource-Policy": "same-origin",
}


@cache
def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath("vendor", name).read_bytes()


def _route(name: str, media_type: str) -> None:
    async def serve() -> Response:
        return Response(_read(name), media_type=f"{media_type}; charset=utf-8", headers=HEADERS)

    router.add_api_route(PREFIX + name, serve, methods=["GET"], include_in_schema=False)


for _name, _type in SERVED.items():
    _route(_name, _type)
